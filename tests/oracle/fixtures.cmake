# Fixture tests that run the independent oracles (PyTorch, transformers.js) before the C++ tests read their output.
include(${CMAKE_CURRENT_LIST_DIR}/model_fixtures.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/tokenizer_fixtures.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/drafter_fixtures.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/deepseek_fixtures.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/chat_template_fixtures.cmake OPTIONAL)
