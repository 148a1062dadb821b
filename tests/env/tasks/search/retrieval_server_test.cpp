// The Search-R1 retrieval server over real HTTP on loopback, with our client and raw requests.
#include <gtest/gtest.h>

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "env/env_test_util.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/retrieval_client.h"
#include "env/tasks/search/retrieval_server.h"

namespace stoa::env {
namespace {

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<testing::TempDir>("server");
    build_bm25_index(testing::small_corpus(), dir_->path());
    index_ = std::make_unique<Bm25Index>(dir_->path());
    server_ = std::make_unique<RetrievalServer>(*index_);
    port_ = server_->bind("127.0.0.1", 0);
    thread_ = std::thread([this] { server_->serve(); });
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
  }
  httplib::Result post(const std::string& body) {
    httplib::Client client("127.0.0.1", port_);
    return client.Post("/retrieve", body, "application/json");
  }
  std::unique_ptr<testing::TempDir> dir_;
  std::unique_ptr<Bm25Index> index_;
  std::unique_ptr<RetrievalServer> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(ServerTest, AnswersSearchR1Requests) {
  auto res =
      post(R"({"queries": ["Velor syndrome gene", "Tamorin"], "topk": 2, "return_scores": true})");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  auto reply = nlohmann::json::parse(res->body);
  ASSERT_EQ(reply["result"].size(), 2u);
  ASSERT_EQ(reply["result"][0].size(), 2u);
  EXPECT_EQ(reply["result"][0][0]["document"]["id"], "d2");
  EXPECT_EQ(reply["result"][0][0]["document"]["contents"], testing::small_corpus()[1].contents);
  EXPECT_GT(reply["result"][0][0]["score"].get<double>(),
            reply["result"][0][1]["score"].get<double>());
  EXPECT_EQ(reply["result"][1][0]["document"]["id"], "d4");

  // Without return_scores: bare documents, as Search-R1's server does.
  res = post(R"({"queries": ["Tamorin"], "topk": 1})");
  ASSERT_TRUE(res);
  reply = nlohmann::json::parse(res->body);
  EXPECT_EQ(reply["result"][0][0]["id"], "d4");
}

TEST_F(ServerTest, ClientMatchesLocalIndex) {
  RetrievalClient client("http://127.0.0.1:" + std::to_string(port_));
  std::vector<std::string> queries = {"Borvex", "Melvar fever treatment", "", "\xff\xfe"};
  auto remote = client.search(queries, 3);
  auto local = index_->search(queries, 3);
  ASSERT_EQ(remote.size(), local.size());
  for (size_t q = 0; q < local.size(); ++q) {
    ASSERT_EQ(remote[q].size(), local[q].size()) << q;
    for (size_t i = 0; i < local[q].size(); ++i) {
      EXPECT_EQ(remote[q][i].id, local[q][i].id);
      EXPECT_EQ(remote[q][i].contents, local[q][i].contents);
      EXPECT_DOUBLE_EQ(remote[q][i].score, local[q][i].score);
    }
  }
  // Concurrent clients.
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i)
        if (client.search({"Borvex"}, 1).at(0).size() == 1) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 40);
}

TEST_F(ServerTest, MalformedRequestsGet400WithJsonError) {
  const char* bad[] = {
      "",
      "not json",
      "[]",
      "{}",
      R"({"queries": "one string"})",
      R"({"queries": [1, 2]})",
      R"({"queries": ["a"], "topk": "3"})",
      R"({"queries": ["a"], "topk": 0})",
      R"({"queries": ["a"], "topk": 100000})",
      R"({"queries": ["a"], "topk": 2.5})",
      R"({"queries": ["a"], "return_scores": "yes"})",
      "{\"queries\": [\"a\"",
  };
  for (const char* body : bad) {
    auto res = post(body);
    ASSERT_TRUE(res) << body;
    EXPECT_EQ(res->status, 400) << body;
    auto reply = nlohmann::json::parse(res->body, nullptr, false);
    ASSERT_TRUE(reply.is_object()) << res->body;
    EXPECT_TRUE(reply["error"].is_string()) << res->body;
  }
  // Huge and odd queries are served.
  std::string huge(2 << 20, 'x');
  nlohmann::json req = {{"queries", {huge, "", "\u0000"}}, {"topk", 3}};
  auto res = post(req.dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // The server is still healthy afterwards.
  httplib::Client client("127.0.0.1", port_);
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(RetrievalClientErrors, UnreachableServerIsNetworkError) {
  RetrievalClient client("http://127.0.0.1:1", 2);
  try {
    client.search({"x"}, 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork);
  }
  EXPECT_THROW(RetrievalClient("https://example.org"), Error);
}

}  // namespace
}  // namespace stoa::env
