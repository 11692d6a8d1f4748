# Tiny DeepSeek-V3 / Kimi checkpoints + deepseek_reference.py outputs + the SpecForge-layout drafter
# (make_tiny_deepseek.py). Part of the tiny_models fixture (after make_tiny_models, whose tokenizer it copies).
add_test(NAME make_tiny_deepseek
         COMMAND ${EAGLET_PYTHON} ${EAGLET_ORACLE_DIR}/make_tiny_deepseek.py
                 --out ${EAGLET_FIXTURES}/deepseek --tiny ${EAGLET_FIXTURES}/tiny)
set_tests_properties(make_tiny_deepseek PROPERTIES
                     FIXTURES_SETUP tiny_models
                     DEPENDS make_tiny_models
                     LABELS oracle
                     TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1")

add_test(NAME deepseek_oracle_selfcheck
         COMMAND ${EAGLET_PYTHON} ${EAGLET_ORACLE_DIR}/test_deepseek_selfcheck.py --fixtures ${EAGLET_FIXTURES}/deepseek)
set_tests_properties(deepseek_oracle_selfcheck PROPERTIES
                     FIXTURES_REQUIRED tiny_models
                     LABELS oracle
                     TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1"
                     FAIL_REGULAR_EXPRESSION "[1-9][0-9]* failed")
