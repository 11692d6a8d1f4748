# Tiny random checkpoints + PyTorch reference outputs (tests/oracle/README.md), made before the model/cli tests.
# Included from tests/oracle/fixtures.cmake inside tests/CMakeLists.txt, where EAGLET_PYTHON (Debian's python3 with
# torch), EAGLET_FIXTURES and EAGLET_SHARED are set.
if(NOT DEFINED EAGLET_ORACLE_DIR)
  set(EAGLET_ORACLE_DIR ${CMAKE_CURRENT_LIST_DIR})
endif()

# Regenerates only when DIR/MANIFEST.json records a different hash of the oracle scripts (else exits in < 1 s).
add_test(NAME make_tiny_models
         COMMAND ${EAGLET_PYTHON} ${EAGLET_ORACLE_DIR}/make_tiny_models.py
                 --out ${EAGLET_FIXTURES}/tiny --shared ${EAGLET_SHARED})
set_tests_properties(make_tiny_models PROPERTIES
                     FIXTURES_SETUP tiny_models
                     LABELS oracle
                     TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1")

add_test(NAME oracle_selfcheck
         COMMAND ${EAGLET_PYTHON} ${EAGLET_ORACLE_DIR}/test_oracle_selfcheck.py
                 --fixtures ${EAGLET_FIXTURES}/tiny --shared ${EAGLET_SHARED})
set_tests_properties(oracle_selfcheck PROPERTIES
                     FIXTURES_REQUIRED tiny_models
                     LABELS oracle
                     TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1"
                     FAIL_REGULAR_EXPRESSION "[1-9][0-9]* failed")
