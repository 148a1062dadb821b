// The operator's page served at GET /: self-contained HTML (no CDN) that polls /v1/status
// (with the operator token it was opened with, ?token=, when the hub is off loopback).
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
// Worker names and every other value come from workers: they only ever become text nodes
// (createElement + textContent), never markup, so a name like <img onerror=...> stays text.
const token=new URLSearchParams(location.search).get('token');
function fmt(v){return typeof v==='number'?(Number.isInteger(v)?String(v):v.toFixed(4)):String(v)}
function cell(tag,text,cls){const c=document.createElement(tag);c.textContent=text;if(cls)c.className=cls;return c}
function line(cells){const r=document.createElement('tr');for(const c of cells)r.appendChild(c);return r}
function fill(id,rows){document.getElementById(id).replaceChildren(...rows)}
function pairs(obj){return Object.entries(obj).map(([k,v])=>line([cell('td',k,'k'),cell('td',fmt(v))]))}
async function tick(){
  try{
    const q=token?'?token='+encodeURIComponent(token):'';
    const r=await fetch('/v1/status'+q,token?{headers:{Authorization:'Bearer '+token}}:{});
    if(!r.ok)throw new Error('HTTP '+r.status);
    const s=await r.json();
    fill('summary',pairs(Object.assign({'latest version':s.latest_version,'step':s.step,
      'uptime (s)':s.uptime_s,'open leases':s.leases_open,'workers':s.workers_total},s.counters)));
    fill('step',s.last_step?pairs(s.last_step):[]);
    const head=line(['worker','version','lag','tok/s','idle','accepted','seen (s ago)'].map(
      (h,i)=>cell('th',h,i?'':'k')));
    const rows=s.workers.map(x=>line([cell('td',x.name,'k'),cell('td',fmt(x.version)),
      cell('td',fmt(x.patch_lag??'-')),cell('td',fmt(x.tokens_per_s)),cell('td',fmt(x.idle_fraction)),
      cell('td',fmt(x.rollouts_accepted)),cell('td',fmt(x.seen_s_ago))]));
    fill('workers',[head,...rows]);
    document.getElementById('err').textContent='';
  }catch(e){document.getElementById('err').textContent='hub unreachable: '+e}
}
tick();setInterval(tick,2000);
</script></body></html>
)html";
}

}  // namespace stoa::hub
