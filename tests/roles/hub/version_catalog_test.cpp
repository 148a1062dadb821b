// The hub's versions (roles/hub/versions/version_catalog.h): nothing published answers no
// version; a version recorded bare (no blobs in the store) is still the latest, with no route;
// the catalog beside the blobs plans each worker's catch-up — patches from its version, an anchor
// for a cold start, nothing for a worker already there — and a catalog that names a version the
// ledger has not recorded makes it the latest; add() reloads the catalog; the ledger's row of a
// publication names its blobs.
#include "roles/hub/versions/version_catalog.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/temp_dir.h"

namespace stoa::hub {
namespace {

pulse::CatalogEntry patch(uint64_t from, uint64_t to) {
  return {pulse::BlobKind::kPatch, from, to, Hash128{from, to}, 10};
}
pulse::CatalogEntry anchor(uint64_t v) {
  return {pulse::BlobKind::kAnchor, v, v, Hash128{v, 0xa}, 1000};
}

VersionRow recorded(uint64_t version) {
  VersionRow row;
  row.version = version;
  row.state_hash = "state-" + std::to_string(version);
  return row;
}

std::vector<std::string> route(const net::VersionInfo& info) {
  std::vector<std::string> out;
  for (const auto& b : info.blobs)
    out.push_back(b.kind + " " + std::to_string(b.from_version) + "->" +
                  std::to_string(b.to_version));
  return out;
}

class VersionCatalogTest : public ::testing::Test {
 protected:
  // The store's catalog.json, as the publisher keeps it beside the blobs.
  void write_catalog(const std::vector<pulse::CatalogEntry>& entries) {
    pulse::Catalog c;
    for (const auto& e : entries) c.add(e);
    c.save(store.dir() + "/catalog.json");
  }
  testing::TempDir dir{"version-catalog"};
  pulse::BlobStore store{dir.path()};
};

TEST_F(VersionCatalogTest, NothingPublishedAnswersNoVersion) {
  VersionCatalog versions(&store, 4);
  versions.restore({});
  EXPECT_FALSE(versions.latest().has_value());
  EXPECT_EQ(versions.latest_published(), 0u);
  const net::VersionInfo info = versions.info(std::nullopt);
  EXPECT_FALSE(info.version.has_value());
  EXPECT_EQ(info.max_staleness, 4u);
  EXPECT_TRUE(info.blobs.empty());
}

TEST_F(VersionCatalogTest, AVersionRecordedBareIsTheLatestWithNoRoute) {
  VersionCatalog versions(&store, 4);
  versions.restore({recorded(1), recorded(2)});
  EXPECT_TRUE(versions.published(2));
  EXPECT_FALSE(versions.published(3));
  EXPECT_EQ(versions.published_count(), 2u);
  const net::VersionInfo info = versions.info(1);
  EXPECT_EQ(info.version, 2u);
  EXPECT_EQ(info.state_hash, "state-2");
  EXPECT_TRUE(info.blobs.empty());
}

TEST_F(VersionCatalogTest, TheCatalogPlansEachWorkersCatchUp) {
  write_catalog({anchor(1), patch(1, 2), patch(2, 3), anchor(3)});
  VersionCatalog versions(&store, 4);
  versions.restore({recorded(1), recorded(2), recorded(3)});
  EXPECT_EQ(route(versions.info(1)), (std::vector<std::string>{"patch 1->2", "patch 2->3"}));
  EXPECT_EQ(route(versions.info(2)), (std::vector<std::string>{"patch 2->3"}));
  EXPECT_EQ(route(versions.info(std::nullopt)), (std::vector<std::string>{"anchor 3->3"}));
  // Already there (or ahead, from a lost history): the version, nothing to fetch.
  EXPECT_TRUE(versions.info(3).blobs.empty());
  EXPECT_EQ(versions.info(3).version, 3u);
  EXPECT_TRUE(versions.info(9).blobs.empty());
  // No patch starts at 0 (older than anything kept): an anchor instead.
  EXPECT_EQ(route(versions.info(0)), (std::vector<std::string>{"anchor 3->3"}));
}

TEST_F(VersionCatalogTest, ACatalogAheadOfTheLedgerNamesTheLatest) {
  write_catalog({anchor(1), patch(1, 2)});
  VersionCatalog versions(&store, 4);
  versions.restore({recorded(1)});
  EXPECT_EQ(versions.latest(), 2u);
  EXPECT_EQ(versions.latest_published(), 1u);  // what intake counts staleness against
  const net::VersionInfo info = versions.info(1);
  EXPECT_EQ(info.version, 2u);
  EXPECT_EQ(info.state_hash, "");  // the ledger has no row for it
  EXPECT_EQ(route(info), (std::vector<std::string>{"patch 1->2"}));
}

TEST_F(VersionCatalogTest, AddReloadsTheCatalog) {
  write_catalog({anchor(1)});
  VersionCatalog versions(&store, 4);
  versions.restore({recorded(1)});
  write_catalog({anchor(1), patch(1, 2)});      // the publisher wrote version 2's patch
  EXPECT_TRUE(versions.info(1).blobs.empty());  // not heard of yet
  versions.add(recorded(2));
  EXPECT_EQ(route(versions.info(1)), (std::vector<std::string>{"patch 1->2"}));
  EXPECT_EQ(versions.info(1).state_hash, "state-2");
}

TEST(VersionRowTest, NamesTheBlobsPublished) {
  pulse::Published published;
  published.version = 5;
  published.patch = patch(4, 5);
  published.anchor = anchor(5);
  const VersionRow row = version_row(published, Hash128{1, 2}, 1234);
  EXPECT_EQ(row.version, 5u);
  EXPECT_EQ(row.state_hash, Hash128({1, 2}).hex());
  EXPECT_EQ(row.published_ms, 1234);
  const auto blobs = nlohmann::json::parse(row.blobs_json);
  ASSERT_EQ(blobs.size(), 2u);
  EXPECT_EQ(blobs[0]["kind"], "patch");
  EXPECT_EQ(blobs[0]["from_version"], 4);
  EXPECT_EQ(blobs[1]["kind"], "anchor");
  EXPECT_EQ(blobs[1]["hash"], Hash128({5, 0xa}).hex());
  EXPECT_EQ(blobs[1]["bytes"], 1000);
}

}  // namespace
}  // namespace stoa::hub
