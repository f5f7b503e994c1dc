# SPDX-License-Identifier: BSD-3-Clause
# remora::dist and DataParallel tests (included from tests/CMakeLists.txt).
#
# remora_dist_tests is one Catch2 binary (tests/test_dist_*.cpp) whose main()
# calls dist::init: ctest runs it once as a plain process (a world of one) and,
# when the build has MPI, under `mpirun -np 2` (every test then runs on both
# ranks and compares against a one-process reference computed in the same run).
# remora_dist_fault is the fault helper: tests/test_dist_chaos.sh launches it
# (and `remora train`) with one rank stopped, stalled, killed, never started or
# disagreeing, and checks that the job ends within its timeout plus a margin,
# naming the faulty rank.
set(REMORA_DIST_TEST_SOURCES test_dist_main.cpp test_dist_hooks.cpp test_dist_collectives.cpp
    test_dist_data_parallel.cpp)
list(TRANSFORM REMORA_DIST_TEST_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
add_executable(remora_dist_tests ${REMORA_DIST_TEST_SOURCES})
target_link_libraries(remora_dist_tests PRIVATE remora_dist remora remora_catch)
add_executable(remora_dist_fault ${CMAKE_CURRENT_SOURCE_DIR}/test_dist_fault.cpp)
target_link_libraries(remora_dist_fault PRIVATE remora_dist remora)
remora_test_program(remora_dist_tests)
remora_test_program(remora_dist_fault)
if(REMORA_WITH_MPI)
  # The tests call MPI directly once: to provoke a real MPI error (count -1).
  target_compile_definitions(remora_dist_tests PRIVATE REMORA_WITH_MPI=1)
  target_link_libraries(remora_dist_tests PRIVATE MPI::MPI_CXX)
endif()

add_test(NAME dist_world1 COMMAND remora_dist_tests)
set_tests_properties(dist_world1 PROPERTIES TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")

if(REMORA_WITH_MPI)
  # CI runs as root on 2 cores: allow root, oversubscribe, one thread per rank;
  # no CMA single-copy (containers often forbid the ptrace it needs).
  set(REMORA_MPIRUN ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe)
  set(REMORA_MPI_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMPI_MCA_btl_vader_single_copy_mechanism=none;OMPI_MCA_rmaps_base_oversubscribe=1")
  add_test(NAME dist_np2 COMMAND ${REMORA_MPIRUN} -np 2 $<TARGET_FILE:remora_dist_tests>)
  set_tests_properties(dist_np2 PROPERTIES TIMEOUT 300 ENVIRONMENT "${REMORA_MPI_ENV}")
  if(REMORA_WITH_NCCL)
    # NCCL, one rank on one GPU (skips visibly without a GPU).
    add_test(NAME dist_nccl_np1 COMMAND ${REMORA_MPIRUN} -np 1 $<TARGET_FILE:remora_dist_tests> "[nccl]")
    set_tests_properties(dist_nccl_np1 PROPERTIES TIMEOUT 300 ENVIRONMENT "${REMORA_MPI_ENV}")
  endif()
  # Chaos: each case is one fault on rank 0 or 1 of a 2-rank job, which must
  # end non-zero within the case's timeout (4 s, 6 s for an evaluation) plus
  # a few seconds, naming the faulty rank (tests/test_dist_chaos.sh; all of
  # them: bash tests/test_dist_chaos.sh all ...).
  set(REMORA_CHAOS_CASES config abort_r1 error_r1)
  foreach(r 0 1)
    list(APPEND REMORA_CHAOS_CASES step_stop_r${r} step_stall_r${r} step_kill_r${r} step_exit_r${r}
         nostart_r${r} eval_stall_r${r} eval_stop_r${r})
  endforeach()
  if(TARGET remora_cli)
    set(REMORA_CHAOS_REMORA $<TARGET_FILE:remora_cli>)
    list(APPEND REMORA_CHAOS_CASES driver_stop_r0 driver_stop_r1 driver_kill_r0 driver_nostart_r0
         driver_nostart_r1 driver_eval_r0 driver_eval_r1 driver_evalauto_r0)
  else()
    set(REMORA_CHAOS_REMORA none)
  endif()
  foreach(case ${REMORA_CHAOS_CASES})
    add_test(NAME dist_chaos_${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_dist_chaos.sh ${case} $<TARGET_FILE:remora_dist_fault>
              ${REMORA_CHAOS_REMORA} ${PROJECT_SOURCE_DIR} ${REMORA_MPIRUN})
    set_tests_properties(dist_chaos_${case} PROPERTIES TIMEOUT 90 ENVIRONMENT "${REMORA_MPI_ENV}")
  endforeach()
else()
  # Without MPI: a launcher asking for 2 ranks is a clear error, not a silent world of one.
  add_test(NAME dist_no_mpi_launch COMMAND remora_dist_fault nompi)
  # (It exits 2 with the message; "SURVIVED" would not match.)
  set_tests_properties(dist_no_mpi_launch PROPERTIES TIMEOUT 60
    ENVIRONMENT "OMPI_COMM_WORLD_SIZE=2;OMPI_COMM_WORLD_RANK=0"
    PASS_REGULAR_EXPRESSION "built without MPI .* launched by mpirun with 2 ranks")
endif()

# `remora train` under mpirun (tests/test_driver_dist.sh): 2 ranks x half the
# batch == 1 process x the batch (Transformer-XL with memory, BERT, SRU++),
# the same with gradient accumulation, bit-identical 2-rank resume, a 1-process checkpoint re-sharded onto 2 ranks, a batch that does not divide, a rank killed
# mid-run (bounded end, the last checkpoint loads), configs that differ.
add_executable(remora_dist_compare ${CMAKE_CURRENT_SOURCE_DIR}/driver_dist_compare.cpp)
target_link_libraries(remora_dist_compare PRIVATE remora nlohmann_json::nlohmann_json)
if(REMORA_WITH_MPI AND TARGET remora_cli)
  foreach(case equiv_xl equiv_bert equiv_srupp equiv_accum np1 resume reshard batch kill config)
    add_test(NAME driver_dist_${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_driver_dist.sh ${case} $<TARGET_FILE:remora_cli>
              $<TARGET_FILE:remora_dist_compare> ${PROJECT_SOURCE_DIR} ${REMORA_MPIRUN})
    set_tests_properties(driver_dist_${case} PROPERTIES TIMEOUT 300 ENVIRONMENT "${REMORA_MPI_ENV}")
  endforeach()
endif()
