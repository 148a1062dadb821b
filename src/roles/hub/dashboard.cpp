// The operator's page served at GET /: self-contained HTML (no CDN) that polls /v1/status.
#include "roles/hub/dashboard.h"

namespace stoa::hub {

const char* dashboard_html() {
  return R"html(<!doctype html>
<html><head><meta charset="utf-8"><title>Stoa hub</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
h1{font-size:20px} table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right} th{background:#f4f4f4}
.k{text-align:left} #err{color:#b00}
</style></head><body>
<h1>Stoa hub</h1><div id="err"></div>
<table id="summary"></table>
<h2>Last step</h2><table id="step"></table>
<h2>Workers</h2><table id="workers"></table>
<script>
function row(k,v){return '<tr><td class="k">'+k+'</td><td>'+v+'</td></tr>'}
function fmt(v){return typeof v==='number'?(Number.isInteger(v)?v:v.toFixed(4)):String(v)}
async function tick(){
  try{
    const s=await (await fetch('/v1/status')).json();
    let h=row('latest version',fmt(s.latest_version))+row('step',s.step)+
      row('uptime (s)',fmt(s.uptime_s))+row('open leases',s.leases_open);
    for(const [k,v] of Object.entries(s.counters))h+=row(k,fmt(v));
    document.getElementById('summary').innerHTML=h;
    let st='';if(s.last_step)for(const [k,v] of Object.entries(s.last_step))st+=row(k,fmt(v));
    document.getElementById('step').innerHTML=st;
    let w='<tr><th class="k">worker</th><th>version</th><th>lag</th><th>tok/s</th><th>idle</th><th>accepted</th><th>seen (s ago)</th></tr>';
    for(const x of s.workers)w+='<tr><td class="k">'+x.name+'</td><td>'+fmt(x.version)+'</td><td>'+
      fmt(x.patch_lag??'-')+'</td><td>'+fmt(x.tokens_per_s)+'</td><td>'+fmt(x.idle_fraction)+
      '</td><td>'+x.rollouts_accepted+'</td><td>'+fmt(x.seen_s_ago)+'</td></tr>';
    document.getElementById('workers').innerHTML=w;
    document.getElementById('err').textContent='';
  }catch(e){document.getElementById('err').textContent='hub unreachable: '+e}
}
tick();setInterval(tick,2000);
</script></body></html>
)html";
}

}  // namespace stoa::hub
