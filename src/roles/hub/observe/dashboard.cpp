// The operator's page served at GET /: self-contained (no CDN, no library: the charts are SVG
// drawn by the page's own few lines of script), polling /v1/status and /v1/history with the
// session cookie /login set (off loopback; http/operator_login.h): no token in any URL.
//
// Everything on the page that comes from the hub (worker names above all: strangers choose them)
// becomes text nodes (textContent) or numeric SVG attributes; nothing is ever parsed as markup,
// so a name like <img src=x onerror=...> is shown as those characters.
#include "roles/hub/observe/dashboard.h"

namespace stoa::hub {

const char* dashboard_html() {
  return R"html(<!doctype html>
<html><head><meta charset="utf-8"><title>Stoa hub</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 .3em} h2{font-size:15px;margin:1.2em 0 .4em}
#summary span{display:inline-block;margin:0 1.2em .3em 0} #summary b{font-weight:600}
#err,#warn{color:#b00;min-height:1.2em}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:12px}
.chart{background:#fff;border:1px solid #ddd;border-radius:4px;padding:6px 8px}
.chart h3{font-size:13px;margin:0 0 4px;font-weight:600}
.chart svg{width:100%;height:170px;display:block}
.legend span{margin-right:10px;font-size:12px;white-space:nowrap}
.legend i{display:inline-block;width:10px;height:3px;margin-right:4px;vertical-align:middle}
table{border-collapse:collapse;margin:.5em 0;background:#fff}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right} th{background:#f4f4f4}
.k{text-align:left;max-width:28em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
</style></head><body>
<h1>Stoa hub</h1><div id="err"></div><div id="warn"></div>
<div id="summary"></div>
<div class="charts" id="charts"></div>
<h2>Last step</h2><table id="step"></table>
<h2>Workers</h2><table id="workers"></table>
<script>
'use strict';
const NS='http://www.w3.org/2000/svg';
const COLORS=['#1f77b4','#d62728','#2ca02c','#ff7f0e','#9467bd','#8c564b','#e377c2','#17becf'];
const steps=[],versions=[];let lastStep=-1,lastVersion=-1;
const workerSeries=new Map();  // worker id -> {name, points: [[t, tokens/s]]}, bounded
const t0=Date.now();
let task='';  // the run's task (from /v1/status): chart titles name it, they assume none

function el(tag,text,cls){const e=document.createElement(tag);if(text!==undefined)e.textContent=text;if(cls)e.className=cls;return e}
function svgEl(tag,attrs){const e=document.createElementNS(NS,tag);for(const k in attrs)e.setAttribute(k,attrs[k]);return e}
// Very small or large numbers in exponent form (2.86e-6, 1.5e7): in decimals they are too wide
// for an axis label (2.86e-6 in decimals lost its leading digits at the edge) or a table cell.
function sci(v){return v.toExponential(2).replace(/\.?0+e/,'e').replace('e+','e')}
function fmt(v){if(typeof v!=='number')return v===null||v===undefined?'-':String(v);
  if(Number.isInteger(v))return String(v);const a=Math.abs(v);
  return a>=100?v.toFixed(0):a>=1?v.toFixed(2):a>=1e-3?v.toFixed(4):sci(v)}
function tick3(v){const a=Math.abs(v);return a!==0&&(a<1e-3||a>=1e6)?sci(v):String(Number(v.toPrecision(3)))}
function num(v){return typeof v==='number'&&isFinite(v)?v:0}

// One chart: series [{name, color, points: [[x, y], ...]}]. Axes from the data (y from 0 unless
// told), three y ticks, the x range as text. Only numbers reach SVG attributes.
function chart(id,title,xlabel,series,opt){
  opt=opt||{};
  let box=document.getElementById(id);
  if(!box){box=el('div',undefined,'chart');box.id=id;box.appendChild(el('h3',title));
    box.appendChild(svgEl('svg',{viewBox:'0 0 400 170',preserveAspectRatio:'none'}));
    const lg=el('div',undefined,'legend');box.appendChild(lg);document.getElementById('charts').appendChild(box)}
  box.querySelector('h3').textContent=title;
  const svg=box.querySelector('svg'),legend=box.querySelector('.legend');
  const pts=series.flatMap(s=>s.points);
  const L=54,R=392,T=8,B=150;
  const parts=[];
  if(pts.length){
    let x0=Math.min(...pts.map(p=>p[0])),x1=Math.max(...pts.map(p=>p[0]));
    let y0=opt.ymin!==undefined?opt.ymin:Math.min(0,...pts.map(p=>p[1]));
    let y1=opt.ymax!==undefined?opt.ymax:Math.max(...pts.map(p=>p[1]));
    if(x1===x0)x1=x0+1; if(y1<=y0)y1=y0+1;
    const X=x=>L+(x-x0)/(x1-x0)*(R-L),Y=y=>B-(y-y0)/(y1-y0)*(B-T);
    for(let i=0;i<3;i++){const y=y0+(y1-y0)*i/2;
      parts.push(svgEl('line',{x1:L,x2:R,y1:Y(y),y2:Y(y),stroke:'#eee'}));
      const t=svgEl('text',{x:L-4,y:Y(y)+4,'text-anchor':'end','font-size':10,fill:'#666'});t.textContent=tick3(y);parts.push(t)}
    const xl=svgEl('text',{x:L,y:166,'font-size':10,fill:'#666'});xl.textContent=xlabel+' '+tick3(x0)+' … '+tick3(x1);parts.push(xl);
    series.forEach(s=>{if(!s.points.length)return;
      const d=s.points.map((p,i)=>(i?'L':'M')+X(p[0]).toFixed(1)+' '+Y(p[1]).toFixed(1)).join('');
      parts.push(svgEl('path',{d,fill:'none',stroke:s.color,'stroke-width':1.6,'data-series':s.points.length}));
      if(s.points.length===1)parts.push(svgEl('circle',{cx:X(s.points[0][0]),cy:Y(s.points[0][1]),r:2.5,fill:s.color}))});
  }else{const t=svgEl('text',{x:200,y:85,'text-anchor':'middle',fill:'#999','font-size':12});t.textContent='no data yet';parts.push(t)}
  svg.replaceChildren(...parts);
  legend.replaceChildren(...series.map(s=>{const sp=el('span');const sw=el('i');sw.style.background=s.color;
    sp.appendChild(sw);sp.appendChild(document.createTextNode(s.name));return sp}));
}

function series(name,color,list,x,y){return{name,color,points:list.map(p=>[num(p[x]),num(p[y])])}}

function draw(){
  // Whatever the task's reward is (0/1, a score, negative): the mean over the rollouts each step
  // trained on, sampled at the run's temperature. The share of uniform groups (all rewards equal:
  // no learning signal) beside it shows when the reward stops telling rollouts apart.
  chart('c-reward','Training reward (mean over each step\'s rollouts'+(task?', task '+task:'')+')','step',
    [series('reward (mean)','#1f77b4',steps,'step','reward_mean'),
     series('uniform groups (share)','#7f7f7f',steps,'step','uniform_fraction')]);
  chart('c-busy','Trainer busy and worker idle (fraction of time)','step',
    [series('trainer busy','#2ca02c',steps,'step','busy_fraction'),
     series('worker idle (mean)','#d62728',steps,'step','worker_idle_fraction')],{ymin:0,ymax:1});
  chart('c-dppo','DPPO: masked token fraction and TV','step',
    [series('masked fraction','#9467bd',steps,'step','masked_fraction'),
     series('TV','#ff7f0e',steps,'step','tv')]);
  chart('c-versions','PULSE: patch bytes per version','version',
    [series('patch bytes','#8c564b',versions.filter(v=>v.patch_bytes>0),'version','patch_bytes')]);
  chart('c-fleet','Fleet tokens/s (all workers)','step',
    [series('tokens/s (all workers)','#17becf',steps,'step','fleet_tokens_per_s')]);
  chart('c-lag','Patch lag (versions behind, mean over workers)','step',
    [series('patch lag','#e377c2',steps,'step','patch_lag_mean')]);
  const top=[...workerSeries.values()].sort((a,b)=>b.last-a.last).slice(0,COLORS.length);
  chart('c-workers','Tokens/s per worker (the 8 fastest)','seconds',
    top.map((w,i)=>({name:w.name,color:COLORS[i],points:w.points})));
}

function table(id,rows){document.getElementById(id).replaceChildren(...rows)}
function row(cells){const r=el('tr');cells.forEach(c=>r.appendChild(c));return r}

// A worker as people tell it apart: its name, and its id when another worker has the same name
// (every `stoa work` without --name joins as "worker").
function workerLabels(ws){const n=new Map();for(const w of ws){const k=String(w.name??'');n.set(k,(n.get(k)||0)+1)}
  return w=>{const k=String(w.name??'');return n.get(k)>1||!k?k+' ('+String(w.id??'')+')':k}}

function showStatus(s){
  const c=s.counters||{};
  task=typeof s.task==='string'?s.task:'';
  const items=[['version',s.latest_version],['step',s.step],['workers',s.workers_total??(s.workers||[]).length],
    ['rollouts accepted',c.rollouts_accepted],['rejected',c.rollouts_rejected],['groups trained',c.groups_trained],
    ['open leases',s.leases_open],['uptime (s)',s.uptime_s]];
  const v=s.verification||{};
  if('enabled' in v)items.push(['verification',v.enabled?'on':'OFF']);
  const ls=s.learning_signal||{};
  if('steps_without_signal' in ls)items.push(['steps without learning signal',
    fmt(ls.steps_without_signal)+' ('+fmt(ls.consecutive_steps_without_signal)+' in a row)']);
  if('groups_uniform' in ls)items.push(['uniform groups',fmt(ls.groups_uniform)+' of '+fmt(ls.groups)]);
  document.getElementById('warn').replaceChildren(...[v.warning,ls.warning].filter(w=>w).map(w=>el('div',String(w))));
  for(const k of ['rollouts_verified','verification_failures','workers_quarantined'])
    if(k in c||k in s)items.push([k.replace('_',' '),c[k]??s[k]]);
  document.getElementById('summary').replaceChildren(...items.map(([k,v])=>{const sp=el('span',k+' ');sp.appendChild(el('b',fmt(v)));return sp}));
  table('step',s.last_step?Object.entries(s.last_step).filter(([,v])=>typeof v!=='object').map(([k,v])=>row([el('td',k,'k'),el('td',fmt(v))])):[]);
  const head=row(['worker','version','lag','tok/s','idle','accepted','leases','standing','serves','seen (s ago)'].map((h,i)=>el('th',h,i?'':'k')));
  const serves=w=>w.swarm?(w.swarm.serving_peers+' peers, '+(num(w.swarm.uploaded_bytes)/1048576).toFixed(1)+' MiB'):'';
  const ws=s.workers||[];
  const label=workerLabels(ws);
  table('workers',[head,...ws.map(w=>row([el('td',label(w),'k'),el('td',fmt(w.version)),el('td',fmt(w.patch_lag)),
    el('td',fmt(w.tokens_per_s)),el('td',fmt(w.idle_fraction)),el('td',fmt(w.rollouts_accepted)),
    el('td',fmt(w.leases)),el('td',fmt(w.standing)),el('td',serves(w)),el('td',fmt(w.seen_s_ago))]))]);
  const t=(Date.now()-t0)/1000;
  for(const w of ws){const id=String(w.id??w.name);let e=workerSeries.get(id);
    if(!e){if(workerSeries.size>=256)continue;e={points:[],last:0};workerSeries.set(id,e)}
    e.name=label(w);
    e.points.push([t,num(w.tokens_per_s)]);e.last=num(w.tokens_per_s);if(e.points.length>300)e.points.shift()}
}

// The session cookie goes along by itself (same origin); 401: the session ended, log in again.
async function get(path){const r=await fetch(path,{credentials:'same-origin'});
  if(r.status===401){location.href='/login';throw new Error('logged out')}
  if(!r.ok)throw new Error(path+': HTTP '+r.status);return r.json()}

async function tick(){
  try{
    const [s,h]=await Promise.all([get('/v1/status'),get('/v1/history?since_step='+lastStep+'&since_version='+lastVersion)]);
    for(const p of h.steps||[]){steps.push(p);lastStep=Math.max(lastStep,p.step)}
    for(const v of h.versions||[]){versions.push(v);lastVersion=Math.max(lastVersion,v.version)}
    while(steps.length>4096)steps.shift();while(versions.length>4096)versions.shift();
    showStatus(s);draw();
    document.getElementById('err').textContent='';
    document.body.dataset.updates=String(Number(document.body.dataset.updates||0)+1);
  }catch(e){document.getElementById('err').textContent='hub unreachable: '+e.message}
}
draw();tick();setInterval(tick,2000);
</script></body></html>
)html";
}

}  // namespace stoa::hub
