// The hub's side of the swarm, on libtorrent: a private v2 torrent per blob and the tracker's
// bencoded replies. The peer table behind the replies is the hub's (roles/hub/swarm/).
#include <arpa/inet.h>

#include <filesystem>
#include <iterator>
#include <libtorrent/bencode.hpp>
#include <libtorrent/create_torrent.hpp>
#include <libtorrent/entry.hpp>
#include <libtorrent/file_storage.hpp>
#include <libtorrent/torrent_info.hpp>
#include <system_error>

#include "core/error.h"
#include "net/swarm/swarm.h"

namespace stoa::net::swarm {
namespace fs = std::filesystem;

bool available() {
  return true;
}

namespace {

std::string hex_of(const char* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<uint8_t>(data[i]);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

// The index of the blob's file: a v2 torrent pads its file to a whole piece with a pad file.
int blob_file_index(const lt::torrent_info& info) {
  int index = -1;
  for (const lt::file_index_t f : info.files().file_range()) {
    if (info.files().pad_file_at(f)) continue;
    if (index >= 0) return -1;
    index = static_cast<int>(f);
  }
  return index;
}

Torrent describe(std::vector<char> bytes, const lt::torrent_info& info) {
  Torrent t;
  // A hybrid torrent is announced under both: the v1 hash and the v2 hash cut to 20 bytes.
  const lt::info_hash_t& hashes = info.info_hashes();
  if (hashes.has_v1()) t.announce_hashes.push_back(hex_of(hashes.v1.data(), hashes.v1.size()));
  if (hashes.has_v2()) t.announce_hashes.push_back(hex_of(hashes.v2.data(), 20));
  t.size = static_cast<uint64_t>(info.total_size());
  t.piece_bytes = info.piece_length();
  t.bytes = std::move(bytes);
  return t;
}

}  // namespace

Torrent make_torrent(const std::string& dir, const std::string& name) {
  const fs::path file = fs::path(dir) / name;
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "swarm: cannot make a torrent of ", file.string(), ": ",
             ec.message());
  lt::file_storage files;
  files.add_file(name, static_cast<std::int64_t>(size));
  // Hybrid, v1 and v2: v2's per-block merkle hashes name the peer that sent a bad block (v1's
  // per-piece SHA-1 cannot). Not v2 only: libtorrent 2.0.8 pads a v2-only torrent's last file
  // to a whole piece, which makes a one-file torrent a directory and its web seed a directory
  // URL; a hybrid torrent of one file has no pad.
  lt::create_torrent maker(files, 0);
  maker.set_priv(true);  // no DHT, no peer exchange: peers come from the hub's tracker only
  maker.set_creator("stoa");
  lt::error_code lec;
  lt::set_piece_hashes(maker, dir, lec);
  STOA_CHECK(!lec, ErrorKind::kIo, "swarm: hashing ", file.string(), ": ", lec.message());
  std::vector<char> bytes = maker.generate_buf();
  return parse_torrent(std::move(bytes));
}

Torrent parse_torrent(std::vector<char> bytes) {
  lt::error_code ec;
  lt::torrent_info info(lt::span<char const>(bytes.data(), static_cast<long>(bytes.size())), ec,
                        lt::from_span);
  STOA_CHECK(!ec, ErrorKind::kBadFormat, "swarm: not a torrent: ", ec.message());
  STOA_CHECK(blob_file_index(info) >= 0, ErrorKind::kBadFormat,
             "swarm: a blob's torrent holds one file, not ", info.num_files());
  return describe(std::move(bytes), info);
}

std::string announce_reply(const std::vector<PeerAddress>& peers, int interval_s, int complete,
                           int incomplete) {
  std::string compact4, compact6;
  for (const PeerAddress& p : peers) {
    const uint8_t port[2] = {static_cast<uint8_t>(p.port >> 8), static_cast<uint8_t>(p.port)};
    in_addr v4{};
    in6_addr v6{};
    if (::inet_pton(AF_INET, p.ip.c_str(), &v4) == 1) {
      compact4.append(reinterpret_cast<const char*>(&v4), 4)
          .append(reinterpret_cast<const char*>(port), 2);
    } else if (::inet_pton(AF_INET6, p.ip.c_str(), &v6) == 1) {
      compact6.append(reinterpret_cast<const char*>(&v6), 16)
          .append(reinterpret_cast<const char*>(port), 2);
    }
  }
  lt::entry reply(lt::entry::dictionary_t);
  reply["interval"] = interval_s;
  reply["min interval"] = std::max(1, interval_s / 2);
  reply["complete"] = complete;
  reply["incomplete"] = incomplete;
  reply["peers"] = compact4;
  if (!compact6.empty()) reply["peers6"] = compact6;
  std::string out;
  lt::bencode(std::back_inserter(out), reply);
  return out;
}

std::string announce_failure(const std::string& reason) {
  lt::entry reply(lt::entry::dictionary_t);
  reply["failure reason"] = reason;
  std::string out;
  lt::bencode(std::back_inserter(out), reply);
  return out;
}

}  // namespace stoa::net::swarm
