#include "roles/hub/identity/tls_identity.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "core/log.h"
#include "net/join_string.h"

namespace stoa::hub {
namespace {
namespace fs = std::filesystem;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;
using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

File open_file(const std::string& path, const char* mode) {
  File f(std::fopen(path.c_str(), mode));
  STOA_CHECK(f, ErrorKind::kIo, "tls: cannot open ", path);
  return f;
}

std::string fingerprint(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  STOA_CHECK(X509_digest(cert, EVP_sha256(), md, &len) == 1, ErrorKind::kInternal,
             "tls: cannot hash the certificate");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

bool is_ip_literal(const std::string& host) {
  return host.find_first_not_of("0123456789.") == std::string::npos ||
         host.find(':') != std::string::npos;
}

void make_certificate(const std::string& cert_path, const std::string& key_path,
                      const std::string& host) {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free);
  STOA_CHECK(key, ErrorKind::kInternal, "tls: cannot make an EC P-256 key");
  Cert cert(X509_new(), X509_free);
  STOA_CHECK(cert, ErrorKind::kInternal, "tls: X509_new failed");
  X509_set_version(cert.get(), 2);  // v3 (extensions)
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("stoa hub"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  // Workers pin the fingerprint rather than check names; the SAN is for other clients (curl).
  const std::string san = (is_ip_literal(host) ? "IP:" : "DNS:") + host;
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  if (X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, san.c_str())) {
    X509_add_ext(cert.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  STOA_CHECK(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0, ErrorKind::kInternal,
             "tls: cannot sign the certificate");
  {
    // The key file is created owner-only before a byte of the key is written.
    const int fd = ::open(key_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    STOA_CHECK(fd >= 0, ErrorKind::kIo, "tls: cannot create ", key_path);
    File f(::fdopen(fd, "w"));
    STOA_CHECK(
        f && PEM_write_PrivateKey(f.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1,
        ErrorKind::kIo, "tls: cannot write ", key_path);
  }
  File f = open_file(cert_path, "w");
  STOA_CHECK(PEM_write_X509(f.get(), cert.get()) == 1, ErrorKind::kIo, "tls: cannot write ",
             cert_path);
}
}  // namespace

std::string certificate_sha256(const std::string& cert_path) {
  File f = open_file(cert_path, "r");
  Cert cert(PEM_read_X509(f.get(), nullptr, nullptr, nullptr), X509_free);
  STOA_CHECK(cert, ErrorKind::kBadFormat, "tls: ", cert_path, " holds no PEM certificate");
  return fingerprint(cert.get());
}

TlsIdentity ensure_self_signed_certificate(const std::string& dir, const std::string& host) {
  fs::create_directories(dir);
  TlsIdentity id{dir + "/hub-cert.pem", dir + "/hub-key.pem", ""};
  if (!fs::exists(id.cert_path) || !fs::exists(id.key_path)) {
    make_certificate(id.cert_path, id.key_path, host);
    log_info("hub", "made a self-signed certificate ", id.cert_path);
  }
  id.sha256 = certificate_sha256(id.cert_path);
  return id;
}

std::string default_tls(ServerOptions& options, const std::string& dir) {
  if (options.tls_cert_path.empty() && !is_loopback_host(options.host)) {
    auto id = ensure_self_signed_certificate(dir, options.host);
    options.tls_cert_path = id.cert_path;
    options.tls_key_path = id.key_path;
    return id.sha256;
  }
  return options.tls_cert_path.empty() ? "" : certificate_sha256(options.tls_cert_path);
}

std::string hub_join_string(const HubServer& server, const ServerOptions& options,
                            const std::string& join_token, const std::string& sha256) {
  std::string host = options.host;
  if (host == "0.0.0.0" || host == "::" || host.empty()) {
    char name[256] = {};
    host = ::gethostname(name, sizeof name - 1) == 0 && name[0] ? name : "localhost";
  }
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  net::JoinString j;
  j.url = cat(server.tls() ? "https://" : "http://", host, ":", server.port());
  j.token = join_token;
  j.sha256 = server.tls() ? sha256 : "";
  return net::format_join_string(j);
}

}  // namespace stoa::hub
