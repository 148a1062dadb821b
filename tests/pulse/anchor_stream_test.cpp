// Anchors decoded streaming from a file: bit-identical to the in-memory decoder on every tensor
// kind, and every check still bites — the content address, a truncated file, a flipped payload
// byte, trailing bytes, a patch where an anchor belongs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "pulse/anchor_stream.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse/pulse_test_util.h"

namespace stoa::pulse {
namespace {

namespace fs = std::filesystem;
using testing::same_bytes;

struct AnchorFileTest : ::testing::Test {
  void SetUp() override {
    path = (fs::temp_directory_path() /
            ("stoa_anchor_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".blob"))
               .string();
  }
  void TearDown() override { fs::remove(path); }
  void write(const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  ErrorKind error_of(const Hash128* want = nullptr) {
    try {
      decode_anchor_file(path, want);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      return e.kind();
    }
    ADD_FAILURE() << "decode_anchor_file accepted a bad anchor";
    return ErrorKind::kInternal;
  }
  std::string path;
};

TEST_F(AnchorFileTest, StreamingDecodeIsBitIdenticalOnEveryKind) {
  for (const Int8State& state :
       {testing::moe_chain(2).back(), testing::sim_chain(2, 1e-3f).back()}) {
    const std::vector<uint8_t> blob = encode_anchor(state);
    write(blob);
    const Hash128 name = hash_bytes(blob.data(), blob.size());
    Int8State got = decode_anchor_file(path, &name);
    EXPECT_TRUE(same_bytes(got, state));
    EXPECT_EQ(got.state_hash(), state.state_hash());
    EXPECT_EQ(got.fingerprint(), state.fingerprint());
    EXPECT_EQ(got.config_hash(), state.config_hash());
    EXPECT_TRUE(got.verify_cached_hashes());
  }
}

TEST_F(AnchorFileTest, AWrongContentAddressIsRefused) {
  const std::vector<uint8_t> blob = encode_anchor(testing::sim_chain(1, 0).back());
  write(blob);
  Hash128 other = hash_bytes(blob.data(), blob.size());
  other.low ^= 1;
  EXPECT_EQ(error_of(&other), ErrorKind::kIntegrity);
}

TEST_F(AnchorFileTest, ACorruptTransferIsReportedAsNotTheNamedBlob) {
  std::vector<uint8_t> blob = encode_anchor(testing::moe_chain(1).back());
  const Hash128 name = hash_bytes(blob.data(), blob.size());
  blob[blob.size() / 3] ^= 0x10;  // breaks the stream long before the end
  write(blob);
  try {
    decode_anchor_file(path, &name);
    FAIL() << "a corrupt anchor was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity);
    EXPECT_NE(std::string(e.what()).find("hashing to"), std::string::npos) << e.what();
  }
}

TEST_F(AnchorFileTest, TruncatedCorruptOrPaddedFilesAreRefused) {
  const std::vector<uint8_t> blob = encode_anchor(testing::moe_chain(1).back());
  std::vector<uint8_t> cut(blob.begin(), blob.end() - 100);
  write(cut);
  EXPECT_EQ(error_of(), ErrorKind::kBadFormat);
  std::vector<uint8_t> flipped = blob;
  flipped[flipped.size() / 2] ^= 0x40;  // inside the payload
  write(flipped);
  const ErrorKind k = error_of();
  EXPECT_TRUE(k == ErrorKind::kBadFormat || k == ErrorKind::kIntegrity);
  std::vector<uint8_t> padded = blob;
  padded.push_back(0);
  write(padded);
  EXPECT_EQ(error_of(), ErrorKind::kBadFormat);
  std::vector<uint8_t> header_hit = blob;
  header_hit[20] ^= 1;  // the from-version: the header checksum catches it
  write(header_hit);
  EXPECT_EQ(error_of(), ErrorKind::kIntegrity);
}

TEST_F(AnchorFileTest, APatchIsNotAnAnchor) {
  auto chain = testing::sim_chain(2, 1e-3f);
  write(encode_patch(make_patch(chain[0], chain[1])));
  EXPECT_EQ(error_of(), ErrorKind::kBadFormat);
}

}  // namespace
}  // namespace stoa::pulse
