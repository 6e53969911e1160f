# CMake toolchain file: the ignis runtime and CLI for 64-bit ARM Linux, cross-built on x86-64 with
# Debian's cross compiler and arm64 libraries (scripts/install-deps.sh installs them):
#   cmake -S . -B build-arm64 --toolchain cmake/aarch64-linux-gnu.cmake && cmake --build build-arm64 --target ignis
# Build-time tools of the target architecture (ig_embed) run under qemu-aarch64; the result runs
# under `qemu-aarch64 -L / build-arm64/ignis ...` (tests/test_aarch64.py) with the multiarch arm64
# libraries (libc6:arm64 and libgomp1:arm64: the cross packages' ld.so and libc differ in version,
# and mixing them hangs in pthread_create).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config reads the arm64 .pc files (multiarch paths), not the build machine's
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
