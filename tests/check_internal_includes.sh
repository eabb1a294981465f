#!/usr/bin/env bash
# Which headers each part may include, beyond what the include roots already forbid:
#   - the front ends (cli/, gui/, course/) reach the engine through its public headers, never the
#     internals listed here (a backend's interface, sockets, wire formats, the CUDA target);
#   - the engine core never includes the backends target or the CUDA target (they link the core,
#     so the core reaching back would be the link cycle again).
# Prints every offending include as file:line and exits 1; exits 0 when there is none.
# Usage: check_internal_includes.sh <source root>
set -u
root=${1:?usage: check_internal_includes.sh <source root>}
cd "$root" || exit 2

front_end_internal='engine/backend\.h|engine/backends/|engine/cuda/|engine/cpu/|engine/parallel/|engine/ddp/ddp_rank_codec\.h|engine/process_groups/multiprocess/(socket|store|tcp_store|c10d_store|gloo_group|gloo_store)\.h'
core_internal='engine/backend_registry\.h|engine/backends/|engine/cuda/'
core_folders=(engine/*.h engine/*.cpp engine/cpu engine/io engine/layers engine/optim engine/parallel engine/ddp engine/zero engine/process_groups/*.h engine/process_groups/*.cpp engine/run)

status=0
report() {  # $1: what the rule says; $2: grep's file:line:text hits. Not in a pipe: it sets status.
  if [[ -n $2 ]]; then
    echo "$1:"
    echo "$2"
    status=1
  fi
}
report "front ends include engine internals (use the public headers: engine/backend_registry.h, engine/core_backends.h, engine/process_groups/multiprocess/init_process_group.h, engine/ddp/gather_rank_results.h)" \
  "$(grep -rnE --include='*.cpp' --include='*.h' "^#include \"($front_end_internal)" cli gui course)"
report "the engine core includes the backends or CUDA target (reach them through the hook of engine/core_backends.h)" \
  "$(grep -rnE --include='*.cpp' --include='*.h' "^#include \"($core_internal)" "${core_folders[@]}" |
     grep -v '^engine/backend_registry\.h:')"
exit $status
