#!/bin/sh
# The relaxed-CD tests on the mpi conduit: each test as `mpirun -n N` processes (one rank per
# process), at the rank count its job has, without shared memory between the processes by
# default (PGAS_MPI_PSHM=0: the cross-host paths of logging, replay and the recovery fence on
# one machine). Stops at the first failure.
#
#   cd-runtime/tests/mpirun-relaxed.sh
#
# Cargo runs each test binary through `mpirun -n N` (its runner override) and libtest runs the
# tests one at a time, sorted by name, so every process launches the same jobs in the same
# order (cd-runtime/tests/common/mod.rs says how a test checks its results there). A test's
# job must have the world's rank count: SCHEDULE names the count of each test, and a test of a
# listed target that no line runs fails the script before anything is built.
#
# MPIRUN overrides the launcher (default mpirun), MPIRUN_FLAGS its flags (default
# `--allow-run-as-root --oversubscribe`), PGAS_MPI_PSHM the shared-memory setting (default 0).
# Without a launcher that runs, it fails (exit 1).
set -eu

cd "$(dirname "$0")/../.."

# package, test target, rank count, tests: `*` is every test of the target no other line
# names; otherwise the exact names. A rank count of `smp` names a test that runs on smp only
# (in `cargo test --workspace`), with the reason in a comment above it.
SCHEDULE='
cd-runtime relaxed 3 worked_example_counters_and_replay_order
cd-runtime relaxed 2 *
cd-runtime relaxed_fence 3 writers_that_run_ahead_wait_for_the_replay_to_end
cd-runtime relaxed_fence 6 a_ring_whose_ranks_run_ahead_recovers_every_fault_alone
cd-runtime relaxed_frees 2 *
cd-runtime limited_order 3 *
cd-runtime relaxed_overwritten 3 a_message_overwritten_in_the_window_is_read_again_in_a_limited_re_execution
cd-runtime relaxed_overwritten 4 a_message_from_outside_a_cluster_is_rebuilt_after_a_loss_in_it
cd-runtime relaxed_overwritten 2 *
cd-runtime relaxed_privatized 1 privatized_outside_a_relaxed_cd_returns_the_region_itself
cd-runtime relaxed_privatized 2 *
cd-runtime relaxed_rpc 2 *
cd-runtime relaxed_rpc 3 rpcs_into_a_failed_rank_are_replayed_once_in_iwc_order
cd-runtime relaxed_rpc 3 remote_functions_are_replayed_like_the_table_s
cd-runtime relaxed_sync 2 *
cd-runtime relaxed_writers 6 a_recovery_asks_only_the_ranks_that_wrote_into_it
cd-runtime relaxed_writers 4 a_write_the_marks_miss_is_found_by_asking_every_member
integration-tests relaxed_prop 2 a_get_racing_a_mid_body_loss_of_its_target_reads_the_recovered_value
integration-tests relaxed_prop 2 a_lock_home_lost_after_handing_its_lock_over_replays_the_hand_over_in_order
integration-tests relaxed_prop 3 a_rank_lost_after_overwriting_what_it_read_replays_the_first_read
integration-tests relaxed_prop 3 a_loss_while_an_rpc_to_the_lost_rank_waits_is_fenced_and_drained
integration-tests relaxed_prop 3 a_lock_home_lost_before_taking_its_lock_with_a_local_log_ends_its_body
integration-tests relaxed_prop 4 random_programs_with_relaxed_failures_equal_the_fault_free_run_or_end_in_an_error
integration-tests relaxed_prop 3 random_programs_with_relaxed_failures_equal_the_fault_free_run_or_end_in_an_error
# Five processes, each a node of its own: dependency-limited re-executions smaller than the world.
integration-tests relaxed_prop 5 random_programs_with_relaxed_failures_equal_the_fault_free_run_or_end_in_an_error
integration-tests relaxed_halo 4 *
integration-tests relaxed_rank_loss 8 *
integration-tests spbc_clusters 8 *
integration-tests dependency_tracking 7 *
integration-tests dependency_tracking 9 two_escalations_far_apart
integration-tests dependency_tracking 9 a_rank_loss_that_took_the_log_on_a_9_rank_grid
integration-tests dependency_tracking 16 pull_2d_16_ranks_nodes_of_1_and_2
integration-tests dependency_tracking 16 push_2d_16_ranks_nodes_of_1_and_4
integration-tests dependency_tracking 27 mixed_3d_27_ranks_all_four_criteria
# Nodes of 2 ranks only: without shared memory every process is a node of its own.
integration-tests dependency_tracking smp mixed_3d_64_ranks_nodes_of_2
'

host=$(rustc -vV | sed -n 's/^host: //p')
runner_var="CARGO_TARGET_$(echo "$host" | tr 'a-z.-' 'A-Z__')_RUNNER"
launcher="${MPIRUN:-mpirun}"
flags="${MPIRUN_FLAGS---allow-run-as-root --oversubscribe}"
export PGAS_MPI_PSHM="${PGAS_MPI_PSHM-0}"

# Never a pass without the launcher (with or without CI=true): the suite exists to run it.
if ! "$launcher" --version >/dev/null 2>&1; then
    echo "$0: $launcher (MPIRUN) does not run here; install Open MPI (see .ci/run)" >&2
    exit 1
fi

# The names the lines of `pkg target` give explicitly (for `*`'s --skip list).
named() {
    echo "$SCHEDULE" | while read -r p t _ tests; do
        [ "$p" = "$1" ] && [ "$t" = "$2" ] && [ "$tests" != "*" ] && echo "$tests"
    done | tr ' ' '\n' | sort -u
}

echo "$SCHEDULE" | while read -r pkg target _ _; do
    case "$pkg" in "" | "#"*) ;; *) echo "$pkg $target" ;; esac
done | sort -u >"${TMPDIR:-/tmp}/mpirun-relaxed.$$"
trap 'rm -f "${TMPDIR:-/tmp}/mpirun-relaxed.$$"' EXIT

# Build, then check that every name a line gives is a test of its target (an `--exact` name
# that matches nothing would pass running nothing), and that every test of each target is run
# by some line.
while read -r pkg target; do
    cargo test -q -p "$pkg" --features pgas/mpi --test "$target" --no-run </dev/null
    all=$(cargo test -q -p "$pkg" --features pgas/mpi --test "$target" -- --list --format terse \
        | sed -n 's/: test$//p' | sort)
    names=$(named "$pkg" "$target")
    unknown=$(echo "$names" | grep -vxF "$all" || true)
    if [ -n "$names" ] && [ -n "$unknown" ]; then
        echo "$0: SCHEDULE names tests $pkg's $target does not have: $unknown" >&2
        exit 2
    fi
    if echo "$SCHEDULE" | grep -q "^$pkg $target [0-9]* \*$"; then
        continue
    fi
    missing=$(echo "$all" | grep -vxF "$names" || true)
    if [ -n "$missing" ]; then
        echo "$0: $pkg's $target has tests no SCHEDULE line runs: $missing" >&2
        exit 2
    fi
done <"${TMPDIR:-/tmp}/mpirun-relaxed.$$"

export PROPTEST_CASES="${PROPTEST_CASES-64}"
echo "$SCHEDULE" | while read -r pkg target n tests; do
    case "$pkg" in "" | "#"*) continue ;; esac
    [ "$n" != smp ] || continue
    if [ "$tests" = "*" ]; then
        filter=""
        for t in $(named "$pkg" "$target"); do filter="$filter --skip $t"; done
    else
        filter="--exact $tests"
    fi
    echo "== $pkg $target under $launcher -n $n (PGAS_MPI_PSHM=$PGAS_MPI_PSHM)"
    start=$(date +%s)
    # shellcheck disable=SC2086 # word splitting of $filter is intended
    # (stdin from /dev/null: mpirun forwards its stdin, which is this loop's schedule)
    env "$runner_var=$launcher $flags -n $n" \
        cargo test -q -p "$pkg" --features pgas/mpi --test "$target" -- --test-threads=1 $filter \
        </dev/null
    echo "== $pkg $target -n $n: passed in $(($(date +%s) - start)) s"
done
