// The hub's stage relay opens only when a pipeline group needs it (issue 49 item 9): a hub that
// forms groups listens on no second port until it places a hop through the relay (a member behind
// NAT, `stoa work --stage-relay`); groups dialled directly leave it closed. Over real HTTP.
#include <httplib.h>

#include <map>
#include <utility>

#include <boost/asio.hpp>

#include "core/signing.h"
#include "model/memory_need.h"
#include "model/presets.h"
#include "net/pipeline_protocol.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"

namespace stoa::hub::testing {
namespace {

class StageRelayOnDemand : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    model = preset_config("bench-qwen3");  // 14 layers: two workers of half the need make a group
    for (const LayerSpan& s : split_layers(model, 2))
      stage_memory = std::max(stage_memory, memory_needed(model, s).total());
    HubDeps d = deps();
    d.model = model;
    hub = std::make_unique<Hub>(config, d);
    publish(1);
    serve();
  }
  // POST /v1/pipeline/place as worker `name` (joined on first use).
  net::PipelinePlace place(const std::string& name, bool relayed) {
    if (!sessions.count(name)) {
      net::JoinRequest r;
      r.name = name;
      const auto joined = hub->join("join-secret", r);
      sessions[name] = {joined.worker_id, joined.session_token};
    }
    net::PipelinePlaceRequest m;
    m.worker_id = sessions[name].first;
    m.memory_bytes = stage_memory;
    m.port = 7000;
    m.relayed = relayed;
    if (!keys.count(name)) keys[name] = bytes_hex(SigningKey::generate().public_key());
    m.commit_key = keys[name];  // the same every ask: another would be a member come back
    httplib::Client c("127.0.0.1", server->port());
    auto r = c.Post("/v1/pipeline/place", {{"Authorization", "Bearer " + sessions[name].second}},
                    net::to_json(m).dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return net::pipeline_place_from_json(nlohmann::json::parse(r->body));
  }
  // Both workers asked until both are placed.
  std::pair<net::PipelinePlace, net::PipelinePlace> group(const std::string& a,
                                                          const std::string& b, bool relayed) {
    place(a, relayed);
    place(b, relayed);
    return {place(a, relayed), place(b, relayed)};
  }

  ModelConfig model;
  uint64_t stage_memory = 0;
  std::map<std::string, std::string> keys;  // each worker's public commitment key
  std::map<std::string, std::pair<std::string, std::string>> sessions;  // id, session token
};

TEST_F(StageRelayOnDemand, ClosedUntilAGroupPlacesAHopThroughIt) {
  EXPECT_FALSE(server->stage_relay_port()) << "nothing needs it at start";
  const auto [a, b] = group("a", "b", /*relayed=*/false);
  ASSERT_TRUE(a.placed && b.placed);
  EXPECT_EQ(a.relay_port, 0);
  EXPECT_EQ(b.relay_port, 0);
  EXPECT_FALSE(server->stage_relay_port()) << "a group dialled directly needs no relay";

  const auto [c, d] = group("c", "d", /*relayed=*/true);
  ASSERT_TRUE(c.placed && d.placed);
  ASSERT_TRUE(server->stage_relay_port());
  const int port = *server->stage_relay_port();
  EXPECT_GT(port, 0);
  EXPECT_EQ(c.relay_port, port);
  EXPECT_EQ(d.relay_port, port);
  EXPECT_NE(c.serve_key.empty() ? c.next_key : c.serve_key, "");
  // It listens: a member can dial it.
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)}, ec);
  EXPECT_FALSE(ec) << ec.message();
}

}  // namespace
}  // namespace stoa::hub::testing
