// jemalloc's options for the hwtrain binary, which links it (HWTRAIN_USE_JEMALLOC): training
// frees and reallocates the same large activation buffers every step, and returning those pages
// to the OS after each step (glibc's default, jemalloc's decay) costs up to 1.85x on CPU
// (shared/LIBTORCH-NOTES.md). Keep dirty pages.
// MALLOC_CONF in the environment still overrides these.
#ifdef HWTRAIN_JEMALLOC
extern "C" {
// Read by jemalloc at start-up (the unprefixed Debian build).
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}
#endif
