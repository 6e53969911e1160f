/* libignis.c — libignis.so is the core library linked whole (CMakeLists.txt); this file only gives
 * the shared library a translation unit of its own and a version query. */
#include "ignis.h"

IG_API const char *ig_version(void) { return IGNIS_VERSION; }
