// A trainer away from its hub: the trainer routes (roles/hub/http/trainer_routes.cpp) served by a
// real Hub + HubServer on a loopback port, driven by the RemoteTrainerPort a `stoa train --hub`
// uses. Groups come over HTTP and are marked once; a repeat of a lost answer changes nothing; a
// restarted trainer gets back what its predecessor held, a restarted hub does not hand out what
// the trainer holds; versions go up in chunks the hub checks and the hub serves exactly the
// trainer's catalog; a bad token, a second trainer and a corrupt chunk are refused.
#include <httplib.h>

#include "pulse/catalog.h"
#include "pulse/pulse_test_util.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "roles/trainer/remote_port.h"

namespace stoa::trainer {
namespace {

using hub::testing::HubFixture;

class RemotePort : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.serve_trainer = true;
    config.trainer_token = "trainer-secret";
    start();
    trainer_store = std::make_unique<pulse::BlobStore>((dir / "trainer-blobs").string());
  }
  // (Re)starts the hub and its server on the same port.
  void start() {
    server.reset();
    open_hub();
    hub::ServerOptions so;
    so.threads = 4;
    so.port = port;
    serve(so);
    port = server->port();
  }
  RemotePortOptions options(const std::string& token = "trainer-secret") {
    RemotePortOptions o;
    o.hub_url = server->url();
    o.token = token;
    o.chunk_bytes = 1000;  // many chunks per blob
    o.max_backoff = std::chrono::milliseconds(100);
    return o;
  }
  std::string fill_group(const std::string& worker, uint64_t version) {
    auto l = *hub->lease(worker).lease;
    for (int i = 0; i < l.samples; ++i) {
      auto r = hub->submit(worker, rollout(worker, l, "<answer>x</answer>", version));
      EXPECT_EQ(r.status, net::IntakeStatus::kAccepted) << r.detail;
    }
    return l.group_id;
  }
  hub::StepReport report(int64_t step) {
    hub::StepReport r;
    r.step = step;
    r.groups = 1;
    return r;
  }
  std::unique_ptr<pulse::BlobStore> trainer_store;
  std::atomic<bool> stop{false};
  int port = 0;
};

TEST_F(RemotePort, PublishesInChunksAndTheHubServesTheTrainersCatalog) {
  RemoteTrainerPort port_a(options(), *trainer_store, stop);
  EXPECT_FALSE(port_a.latest_version().has_value());
  pulse::Publisher publisher(*trainer_store, {});
  pulse::Int8State state = pulse::testing::synthetic_state(2, 16, 64, 1);
  state.set_version(0);
  const pulse::Published v0 = publisher.publish(state);
  port_a.publish_version(v0, publisher.current()->state_hash());
  ASSERT_TRUE(v0.anchor.has_value());
  EXPECT_GT(port_a.bytes_uploaded(), v0.anchor->bytes - 1);  // the anchor went up in chunks
  EXPECT_EQ(hub->latest_version().value_or(99), 0u);
  EXPECT_EQ(hub->store().get(v0.anchor->hash), trainer_store->get(v0.anchor->hash));
  pulse::Int8State next = pulse::testing::synthetic_step(state);
  next.set_version(1);
  const pulse::Published v1 = publisher.publish(next);
  ASSERT_TRUE(v1.patch.has_value());
  const uint64_t before = port_a.bytes_uploaded();
  port_a.publish_version(v1, publisher.current()->state_hash());
  EXPECT_EQ(port_a.bytes_uploaded() - before, v1.patch->bytes) << "only the new patch goes up";
  EXPECT_EQ(hub->latest_version().value_or(99), 1u);
  // A worker at version 0 is planned the trainer's patch by the hub.
  const auto info = hub->version_info(0);
  ASSERT_EQ(info.blobs.size(), 1u);
  EXPECT_EQ(info.blobs[0].hash, v1.patch->hash.hex());
  EXPECT_EQ(pulse::Catalog::load(hub->store().dir() + "/catalog.json").entries(),
            publisher.catalog().entries());
}

TEST_F(RemotePort, GroupsAreTrainedOnceAcrossRestartsOfEitherSide) {
  publish(1);
  const std::string w = join();
  const std::string g1 = fill_group(w, 1), g2 = fill_group(w, 1);
  {
    RemoteTrainerPort first(options(), *trainer_store, stop);
    auto got = first.take_groups(1, std::chrono::milliseconds(0));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].group_id, g1);
    ASSERT_EQ(got[0].rollouts.size(), 2u);
    EXPECT_EQ(got[0].rollouts[0].tokens.size(), got[0].rollouts[0].mask.size());
    // A trainer killed while holding g1 ...
  }
  // ... and its replacement: g1 comes back (attach releases what the old one held).
  RemoteTrainerPort port_b(options(), *trainer_store, stop);
  auto got = port_b.take_groups(4, std::chrono::milliseconds(0));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].group_id, g1);
  port_b.mark_trained({g1}, report(1));
  EXPECT_EQ(port_b.last_step(), 1);
  // The hub restarts while the trainer holds g2: it does not hand g2 out again.
  const std::string g3 = fill_group(w, 1);
  start();
  auto after = port_b.take_groups(4, std::chrono::milliseconds(0));
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].group_id, g3);
  port_b.mark_trained({g2, g3}, report(2));
  // The repeat of a call whose answer was lost changes nothing.
  port_b.mark_trained({g2, g3}, report(2));
  port_b.mark_dropped({}, "stale");
  auto c = hub->counters();
  EXPECT_EQ(c["groups_trained"], 3) << "g1, g2 and g3 once each (the repeat counts nothing)";
  EXPECT_EQ(hub->last_step(), 2);
  EXPECT_TRUE(port_b.take_groups(4, std::chrono::milliseconds(0)).empty());
}

TEST_F(RemotePort, StrangersSecondTrainersAndCorruptChunksAreRefused) {
  EXPECT_THROW(RemoteTrainerPort(options("join-secret"), *trainer_store, stop),
               RemoteTrainerRefused)
      << "a worker's join token is not a trainer's";
  RemoteTrainerPort old_one(options(), *trainer_store, stop);
  RemoteTrainerPort new_one(options(), *trainer_store, stop);
  try {
    old_one.take_groups(1, std::chrono::milliseconds(0));
    FAIL() << "the trainer replaced by a newer one must be refused";
  } catch (const RemoteTrainerRefused& e) {
    EXPECT_NE(std::string(e.what()).find("another trainer attached"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(new_one.take_groups(1, std::chrono::milliseconds(0)));

  // A chunk whose bytes do not hash to the blob's name: 422 and nothing enters the store.
  httplib::Client raw("127.0.0.1", port);
  httplib::Headers auth = {{"Authorization", "Bearer trainer-secret"}};
  const Hash128 name = hash_bytes("abcd", 4);
  auto r = raw.Post(("/v1/trainer/blobs/" + name.hex() + "?offset=0&total=4").c_str(), auth, "abce",
                    "application/octet-stream");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 422) << r->body;
  EXPECT_FALSE(hub->store().contains(name));
  // A chunk at the wrong offset names where the hub stands.
  r = raw.Post(("/v1/trainer/blobs/" + name.hex() + "?offset=2&total=4").c_str(), auth, "cd",
               "application/octet-stream");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
  EXPECT_NE(r->body.find("holds 0 bytes"), std::string::npos) << r->body;
  // A publish naming a blob the hub does not hold is refused; so is a malformed one.
  r = raw.Post("/v1/trainer/publish", auth, R"({"session":"x","version":1})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << "a session that is not the attached trainer's: " << r->body;
  r = raw.Post("/v1/trainer/groups", auth, "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  // Without a token.
  r = raw.Post("/v1/trainer/attach", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
}

}  // namespace
}  // namespace stoa::trainer
