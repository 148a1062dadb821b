// `stoa search index` + `stoa search serve` as processes: the real binary answers a Search-R1
// client over loopback HTTP and shuts down cleanly on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "env/env_test_util.h"
#include "env/tasks/search/retrieval_client.h"
#include "support/stoa_cli.h"

namespace stoa::env {
namespace {

TEST(SearchServeCommand, IndexThenServeThenQuery) {
  const std::string binary = ::stoa::testing::stoa_binary("");
  if (binary.empty() || !std::filesystem::exists(binary)) GTEST_SKIP() << "no STOA_BINARY";
  testing::TempDir dir("serve_cmd");
  std::vector<nlohmann::json> records;
  for (const auto& d : testing::small_corpus()) records.push_back(to_json(d));
  write_jsonl(dir / "corpus.jsonl", records);
  std::string cmd = binary + " search index --corpus " + dir / "corpus.jsonl" + " --out " +
                    dir / "index" + " > " + dir / "index.log" + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  int out_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    std::string index = dir / "index";
    execl(binary.c_str(), binary.c_str(), "search", "serve", "--index", index.c_str(), "--port",
          "0", "--host", "127.0.0.1", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out_pipe[1]);
  FILE* out = fdopen(out_pipe[0], "r");
  char line[256] = {0};
  ASSERT_NE(fgets(line, sizeof line, out), nullptr) << "server printed nothing";
  int port = 0;
  ASSERT_EQ(std::sscanf(line, "listening 127.0.0.1:%d", &port), 1) << line;

  RetrievalClient client("http://127.0.0.1:" + std::to_string(port) + "/retrieve");
  auto hits = client.search({"Velor syndrome gene", "Zentrax"}, 2);
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].at(0).id, "d2");
  EXPECT_EQ(hits[1].at(0).id, "d6");

  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  fclose(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace stoa::env
