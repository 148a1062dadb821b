#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "pulse/publisher.h"
#include "pulse_test_util.h"

namespace stoa::pulse {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

std::vector<uint8_t> bytes_of(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

TEST(PulseBlobStore, PutGetListPrune) {
  TempDir dir("store");
  BlobStore store(dir.path.string());
  Hash128 a = store.put(bytes_of("alpha"));
  Hash128 b = store.put(bytes_of("beta"));
  EXPECT_EQ(a, hash_bytes("alpha", 5));
  EXPECT_EQ(store.put(bytes_of("alpha")), a);  // idempotent
  EXPECT_EQ(store.get(a), bytes_of("alpha"));
  EXPECT_EQ(store.size_of(b), 4u);
  EXPECT_EQ(store.list().size(), 2u);
  EXPECT_TRUE(fs::exists(dir.path / a.hex()));
  for (const auto& e : fs::directory_iterator(dir.path))  // no temp files left behind
    EXPECT_EQ(e.path().filename().string().size(), 32u);
  // Stray files are not blobs.
  std::ofstream(dir.path / "catalog.json") << "{}";
  EXPECT_EQ(store.list().size(), 2u);
  auto removed = store.prune({b});
  EXPECT_EQ(removed, std::vector<Hash128>{a});
  EXPECT_FALSE(store.contains(a));
  EXPECT_TRUE(fs::exists(dir.path / "catalog.json"));
  try {
    store.get(a);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
}

TEST(PulseBlobStore, CorruptBlobIsRefused) {
  TempDir dir("corrupt");
  BlobStore store(dir.path.string());
  Hash128 h = store.put(bytes_of("some blob bytes"));
  std::ofstream(store.path_of(h), std::ios::binary | std::ios::trunc) << "some blob bytez";
  try {
    store.get(h);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity);
  }
}

CatalogEntry patch(uint64_t from, uint64_t to, uint64_t bytes) {
  return CatalogEntry{BlobKind::kPatch, from, to, Hash128{from, to}, bytes};
}
CatalogEntry anchor(uint64_t v, uint64_t bytes) {
  return CatalogEntry{BlobKind::kAnchor, v, v, Hash128{v, 0xa}, bytes};
}

std::vector<std::pair<uint64_t, uint64_t>> steps(const std::vector<CatalogEntry>& route) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& e : route) out.emplace_back(e.from_version, e.to_version);
  return out;
}

TEST(PulseCatalog, PlansTheCheapestRoute) {
  Catalog c;
  c.add(anchor(0, 1000));
  c.add(anchor(10, 1000));
  for (uint64_t v = 0; v < 14; ++v) c.add(patch(v, v + 1, 10));
  using P = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(steps(c.plan(12, 14)), (P{{12, 13}, {13, 14}}));
  EXPECT_TRUE(c.plan(14, 14).empty());
  EXPECT_EQ(steps(c.plan(std::nullopt, 12)), (P{{10, 10}, {10, 11}, {11, 12}}));
  EXPECT_EQ(steps(c.plan(1, 14)), (P{{1, 2},
                                     {2, 3},
                                     {3, 4},
                                     {4, 5},
                                     {5, 6},
                                     {6, 7},
                                     {7, 8},
                                     {8, 9},
                                     {9, 10},
                                     {10, 11},
                                     {11, 12},
                                     {12, 13},
                                     {13, 14}}));
  // A composed patch is preferred when smaller.
  c.add(patch(2, 12, 50));
  EXPECT_EQ(steps(c.plan(2, 13)), (P{{2, 12}, {12, 13}}));
  // Far behind with expensive patches: the anchor wins.
  Catalog d;
  d.add(anchor(10, 100));
  for (uint64_t v = 0; v < 12; ++v) d.add(patch(v, v + 1, 60));
  EXPECT_EQ(steps(d.plan(3, 12)), (P{{10, 10}, {10, 11}, {11, 12}}));
  EXPECT_THROW(d.plan(std::nullopt, 5), Error);  // no anchor at or below 5
  EXPECT_THROW(d.plan(13, 12), Error);
}

TEST(PulseCatalog, RetentionKeepsTheNewestAnchorsAndWhatFollows) {
  Catalog c;
  for (uint64_t v = 0; v <= 30; v += 10) c.add(anchor(v, 1000));
  for (uint64_t v = 0; v < 35; ++v) c.add(patch(v, v + 1, 10));
  auto dropped = c.retain(RetentionPolicy{2});
  EXPECT_EQ(dropped.size(), 2u + 20u);  // anchors 0 and 10, patches 0..19
  for (const auto& e : c.entries()) EXPECT_GE(e.from_version, 20u);
  auto route = c.plan(15, 35);  // too old for the kept patches: the newest anchor + patches
  EXPECT_EQ(route.front().kind, BlobKind::kAnchor);
  EXPECT_EQ(route.front().to_version, 30u);
  EXPECT_EQ(route.size(), 6u);
  Catalog back = Catalog::from_json(c.to_json(), "test");
  EXPECT_EQ(back.entries(), c.entries());
  EXPECT_THROW(Catalog::from_json(nlohmann::json::parse(R"({"format":"x"})"), "bad"), Error);
  EXPECT_THROW(Catalog::from_json(nlohmann::json::parse(R"({"format":"stoa-pulse-catalog-1",
      "blobs":[{"kind":"patch","from":3,"to":2,"hash":"00","bytes":1}]})"),
                                  "bad"),
               Error);
}

// The sender publishes a run; workers at every possible version catch up through the store.
TEST(PulsePublisher, WorkersCatchUpFromAnyVersion) {
  TempDir dir("publisher");
  BlobStore store(dir.path.string());
  auto chain = testing::sim_chain(26, 1e-4f);
  {
    Publisher pub(store, PublisherOptions{10, RetentionPolicy{2}, {}});
    for (const auto& s : chain) {
      Published out = pub.publish(s);
      EXPECT_EQ(out.patch.has_value(), s.version() > 0);
      EXPECT_EQ(out.anchor.has_value(), s.version() % 10 == 0);
    }
    EXPECT_THROW(pub.publish(chain[3]), Error);  // not newer
  }
  Catalog catalog = Catalog::load((dir.path / "catalog.json").string());
  EXPECT_EQ(catalog.latest_version(), 25u);
  // Retention kept anchors 10 and 20 and the patches after 10.
  EXPECT_EQ(store.list().size(), catalog.entries().size());
  Catalog scanned = Catalog::scan(store);
  EXPECT_EQ(scanned.entries().size(), catalog.entries().size());
  const Int8State& latest = chain.back();
  std::vector<std::optional<uint64_t>> starts = {std::nullopt};
  for (uint64_t v = 0; v <= 25; ++v) starts.push_back(v);
  for (auto have : starts) {
    SCOPED_TRACE(have ? cat("version ", *have) : std::string("cold start"));
    std::optional<Int8State> worker;
    if (have) worker = chain[*have];
    for (const CatalogEntry& e : catalog.plan(have, 25)) {
      std::vector<uint8_t> blob = store.get(e.hash);
      if (e.kind == BlobKind::kAnchor)
        worker = decode_anchor(blob);
      else
        apply_patch(*worker, decode_patch(blob));
    }
    ASSERT_TRUE(worker.has_value());
    EXPECT_TRUE(testing::same_bytes(*worker, latest));
  }
}

}  // namespace
}  // namespace stoa::pulse
