#!/bin/sh
# The pgas conformance suite on the mpi conduit: every test file of pgas/tests (but
# compile_fail.rs, a trybuild test, and failure_paths.rs and different_programs.rs, which start
# mpirun themselves) as `mpirun -n N` processes, for each N given (default: 2 3 4), stopping at
# the first failure.
#
#   pgas/tests/mpirun-suite.sh [N...]
#
# Cargo runs each test binary through `mpirun -n N` (its runner override), and libtest runs
# the tests one at a time, sorted by name, so every process launches the same jobs in the
# same order (see pgas/tests/common/mod.rs). MPIRUN overrides the launcher (default mpirun),
# MPIRUN_FLAGS its flags (default `--allow-run-as-root --oversubscribe`, for Open MPI in a
# root container and more processes than cores). Uses CARGO_TARGET_DIR like any cargo run.
# Without a launcher that runs, it fails (exit 1) before building anything.
set -eu

cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || set -- 2 3 4

# The targets, named explicitly; a test file added to pgas/tests must be added here.
TESTS="atomics basics collectives dist_array dist_object errors futures handles hook in_flight local_view remote reserved rma rpc sync teams uts view_array vis"
for f in pgas/tests/*.rs; do
    t=$(basename "$f" .rs)
    case " $TESTS compile_fail failure_paths different_programs " in
        *" $t "*) ;;
        *) echo "$0: pgas/tests/$t.rs is not in TESTS" >&2; exit 2 ;;
    esac
done
targets=""
for t in $TESTS; do targets="$targets --test $t"; done

host=$(rustc -vV | sed -n 's/^host: //p')
runner_var="CARGO_TARGET_$(echo "$host" | tr 'a-z.-' 'A-Z__')_RUNNER"
launcher="${MPIRUN:-mpirun}"
flags="${MPIRUN_FLAGS---allow-run-as-root --oversubscribe}"

# Never a pass without the launcher (with or without CI=true): the suite exists to run it.
if ! "$launcher" --version >/dev/null 2>&1; then
    echo "$0: $launcher (MPIRUN) does not run here; install Open MPI (see .ci/run)" >&2
    exit 1
fi

# shellcheck disable=SC2086 # word splitting of $targets is intended
cargo test -p pgas --features mpi $targets --no-run
for n in "$@"; do
    echo "== pgas suite under $launcher -n $n"
    start=$(date +%s)
    # shellcheck disable=SC2086
    env "$runner_var=$launcher $flags -n $n" \
        cargo test -p pgas --features mpi $targets -- --test-threads=1 --quiet
    echo "== pgas suite under $launcher -n $n: passed in $(($(date +%s) - start)) s"
done
