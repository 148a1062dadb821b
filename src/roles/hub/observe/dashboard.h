// The dashboard page the hub serves at GET /.
#pragma once

namespace stoa::hub {

// Self-contained HTML (no CDN, no external scripts) that polls /v1/status and renders it.
const char* dashboard_html();

}  // namespace stoa::hub
