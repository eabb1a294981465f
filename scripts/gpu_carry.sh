# shellcheck shell=bash
# What the dpviz build needs from Debian packages, carried to a GPU machine that has none of them
# (sourced by scripts/gpu_check.sh; `scripts/gpu_check.sh --make-carry DIR` makes the folder).
#
# DIR (about 45 MB; name it in the device call's `carry` and ignore it in git through
# .git/info/exclude) holds:
#   include/  cblas.h f77blas.h openblas_config.h (libopenblas-dev), nlohmann/ (nlohmann-json3-dev),
#             CLI/ (libcli11-dev), gtest/ gmock/ (googletest), gloo/ (libgloo-dev)
#   lib/      libopenblas.so.0 + libgfortran.so.5, libquadmath.so.0; libgtest*.a, libgmock*.a;
#             libgloo.so.0 + libhiredis, libibverbs, libnl-3, libnl-route-3
# The CMake package files for these are generated on the GPU machine (the Debian ones name /usr
# paths, which do not exist there).

# make_carry DIR: copies the files above from this Debian 12 machine's packages into DIR.
make_carry() {
  local dir=$1 a=/usr/lib/x86_64-linux-gnu l=/lib/x86_64-linux-gnu
  mkdir -p "$dir/include" "$dir/lib" || return 1
  # shellcheck disable=SC2015  # the message is for any copy that fails
  cp /usr/include/x86_64-linux-gnu/openblas-pthread/{cblas.h,f77blas.h,openblas_config.h} "$dir/include/" &&
    cp -rL /usr/include/nlohmann /usr/include/CLI /usr/include/gtest /usr/include/gmock /usr/include/gloo \
      "$dir/include/" &&
    cp -L $a/openblas-pthread/libopenblas.so.0 "$dir/lib/libopenblas.so.0" &&
    ln -sf libopenblas.so.0 "$dir/lib/libopenblas.so" &&
    cp -L $l/libgfortran.so.5 $l/libquadmath.so.0 "$dir/lib/" &&
    cp -L $a/lib{gtest,gtest_main,gmock,gmock_main}.a "$dir/lib/" &&
    cp -L /usr/lib/libgloo.so.0 "$dir/lib/" &&
    cp -L $l/libhiredis.so.0.14 $l/libibverbs.so.1 $l/libnl-3.so.200 $l/libnl-route-3.so.200 "$dir/lib/" ||
    { echo "--make-carry: a file is missing; install the build packages first (scripts/install_deps.sh)"; return 1; }
  du -sh "$dir"
}

# carry_missing CARRY: prints the files the build needs that CARRY lacks (nothing when complete).
carry_missing() {
  local f
  for f in include/cblas.h include/nlohmann/json.hpp include/CLI/CLI.hpp include/gtest/gtest.h include/gloo/config.h \
           lib/libopenblas.so.0 lib/libgtest.a lib/libgloo.so.0; do
    [[ -e $1/$f ]] || printf ' %s' "$f"
  done
}

# system_missing: the build's headers this machine's compiler cannot find, with their Debian package.
system_missing() {
  local pair
  for pair in cblas.h:libopenblas-dev nlohmann/json.hpp:nlohmann-json3-dev CLI/CLI.hpp:libcli11-dev \
              gtest/gtest.h:googletest gloo/config.h:libgloo-dev; do
    echo "#include <${pair%%:*}>" | c++ -x c++ -fsyntax-only -I/usr/include/x86_64-linux-gnu/openblas-pthread - \
      2>/dev/null || printf ' %s (%s)' "${pair%%:*}" "${pair#*:}"
  done
}

# carry_cmake_args CARRY WORK: writes CMake package files for CARRY's libraries under WORK and sets
# CARRY_CMAKE_ARGS (the configure flags that use them); exports LD_LIBRARY_PATH for the tests.
carry_cmake_args() {
  local carry=$1 work=$2
  export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  mkdir -p "$work/cmake/nlohmann_json" "$work/cmake/CLI11" "$work/cmake/Gloo"
  header_only_package() {  # header_only_package NAME TARGET VERSION
    printf 'if(NOT TARGET %s)\n  add_library(%s INTERFACE IMPORTED)\n  set_target_properties(%s PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "%s/include")\nendif()\n' \
      "$2" "$2" "$2" "$carry" > "$work/cmake/$1/$1Config.cmake"
    printf 'set(PACKAGE_VERSION %s)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\nset(PACKAGE_VERSION_EXACT FALSE)\n' "$3" \
      > "$work/cmake/$1/$1ConfigVersion.cmake"
  }
  header_only_package nlohmann_json nlohmann_json::nlohmann_json 3.11.2
  header_only_package CLI11 CLI11::CLI11 2.3.1
  cat > "$work/cmake/Gloo/GlooConfig.cmake" <<CFG
if(NOT TARGET gloo)
  add_library(gloo SHARED IMPORTED)
  set_target_properties(gloo PROPERTIES IMPORTED_LOCATION "$carry/lib/libgloo.so.0" INTERFACE_INCLUDE_DIRECTORIES "$carry/include")
endif()
CFG
  # shellcheck disable=SC2034  # read by gpu_check.sh
  CARRY_CMAKE_ARGS=(-Dnlohmann_json_DIR="$work/cmake/nlohmann_json" -DCLI11_DIR="$work/cmake/CLI11"
                    -DGloo_DIR="$work/cmake/Gloo" -DGTEST_ROOT="$carry" -DCMAKE_LIBRARY_PATH="$carry/lib"
                    -DCMAKE_CXX_FLAGS="-isystem $carry/include"
                    "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath,$carry/lib -Wl,-rpath-link,$carry/lib")
}

# find_nccl PYTHON WORK: sets NCCL_INC and NCCL_LIB to the toolkit's NCCL, else the one of PyTorch's
# wheels (nvidia-nccl-cu13: include/nccl.h, lib/libnccl.so.2, linked through a libnccl.so in WORK).
find_nccl() {
  local py=$1 work=$2 nvcc_dir d f pynccl
  nvcc_dir=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
  NCCL_INC=""; NCCL_LIB=""
  for d in /usr/local/cuda/include /usr/include "$nvcc_dir/../include"; do
    [[ -f $d/nccl.h ]] && NCCL_INC=$d && break
  done
  for f in /usr/local/cuda/lib64/libnccl.so /usr/local/cuda/lib/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so; do
    [[ -e $f ]] && NCCL_LIB=$f && break
  done
  [[ -n $NCCL_INC && -n $NCCL_LIB ]] && return 0
  pynccl=$("$py" -c 'import importlib.util as u; s=u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0])' \
    2>/dev/null || true)
  if [[ -n $pynccl && -f $pynccl/include/nccl.h ]]; then
    mkdir -p "$work/nccl/lib"
    ln -sf "$pynccl/lib/libnccl.so.2" "$work/nccl/lib/libnccl.so"
    NCCL_INC=$pynccl/include; NCCL_LIB=$work/nccl/lib/libnccl.so
    export LD_LIBRARY_PATH="$pynccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
}
