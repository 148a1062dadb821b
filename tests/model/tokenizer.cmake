# Tokenizer tests: unit (tiny hand-built vocabularies), fault (malformed files, random bytes;
# also run under ASan+UBSan), oracle (Qwen3's tokenizer.json against @huggingface/tokenizers).
stoa_test(tokenizer_test SOURCES tokenizer_test.cpp bpe_trainer_test.cpp LIBS stoa_model LABELS unit)
stoa_test(tokenizer_oracle_test SOURCES tokenizer_oracle_test.cpp
          LIBS stoa_model nlohmann_json::nlohmann_json
          LABELS oracle TIMEOUT 120)
stoa_test(tokenizer_fault_test SOURCES tokenizer_fault_test.cpp
          LIBS stoa_model nlohmann_json::nlohmann_json
          LABELS unit fault)
# Runs the built `stoa` binary (build the stoa target first).
stoa_test(tokenizer_cli_test SOURCES tokenizer_cli_test.cpp
          LIBS stoa_model nlohmann_json::nlohmann_json
          LABELS integration)
if(TARGET stoa)
  add_dependencies(tokenizer_cli_test stoa)
endif()
