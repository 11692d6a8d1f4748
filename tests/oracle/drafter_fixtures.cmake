# Tiny EAGLE-3 drafter fixtures + PyTorch reference outputs (tests/oracle/README.md, "Drafter fixtures"), made after
# the tiny targets and before the drafter tests. Included from tests/oracle/fixtures.cmake inside
# tests/CMakeLists.txt, where EAGLET_PYTHON (Debian's python3 with torch) and EAGLET_FIXTURES are set.
if(NOT DEFINED EAGLET_ORACLE_DIR)
  set(EAGLET_ORACLE_DIR ${CMAKE_CURRENT_LIST_DIR})
endif()

# Regenerates only when DIR/MANIFEST.json records a different hash of the oracle scripts and of tiny/llama_fp32
# (else exits in < 1 s). A full run takes a few seconds.
add_test(NAME make_tiny_drafters
         COMMAND ${EAGLET_PYTHON} ${EAGLET_ORACLE_DIR}/make_tiny_drafters.py
                 --out ${EAGLET_FIXTURES}/drafters --targets ${EAGLET_FIXTURES}/tiny)
set_tests_properties(make_tiny_drafters PROPERTIES
                     FIXTURES_SETUP tiny_drafters
                     FIXTURES_REQUIRED tiny_models
                     LABELS oracle
                     TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1")

add_test(NAME drafter_oracle_selfcheck
         COMMAND ${EAGLET_PYTHON} ${EAGLET_ORACLE_DIR}/test_drafter_selfcheck.py
                 --fixtures ${EAGLET_FIXTURES}/drafters --targets ${EAGLET_FIXTURES}/tiny)
set_tests_properties(drafter_oracle_selfcheck PROPERTIES
                     FIXTURES_REQUIRED "tiny_models;tiny_drafters"
                     LABELS oracle
                     TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1"
                     FAIL_REGULAR_EXPRESSION "[1-9][0-9]* failed")
