// hwtrain shim (see ../../README.md): ProcessGroupGloo.hpp includes this; nothing is needed from it.
#pragma once
