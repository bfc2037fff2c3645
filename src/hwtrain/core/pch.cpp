// Compiled once to hold the precompiled header that every hwtrain target reuses.
