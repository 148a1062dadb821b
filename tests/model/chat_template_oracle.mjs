// Oracle side of the chat-template tests: renders each case with @huggingface/jinja (the
// renderer transformers.js uses) and writes one JSON line per case.
//
//   node chat_template_oracle.mjs JINJA_INDEX_JS IN.jsonl OUT.jsonl
//
// Case {"template", "messages", "add_generation_prompt", "bos_token", "eos_token", "extra"}
//   -> {"text": rendered} or {"error": message}
import fs from "node:fs";
import { pathToFileURL } from "node:url";

const [modulePath, inPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node chat_template_oracle.mjs JINJA_INDEX_JS IN.jsonl OUT.jsonl");
  process.exit(2);
}
const { Template } = await import(pathToFileURL(modulePath).href);

const parsed = new Map();
const out = [];
for (const line of fs.readFileSync(inPath, "utf8").split("\n")) {
  if (line.length === 0) continue;
  const c = JSON.parse(line);
  try {
    if (!parsed.has(c.template)) parsed.set(c.template, new Template(c.template));
    const text = parsed.get(c.template).render({
      messages: c.messages,
      add_generation_prompt: c.add_generation_prompt,
      bos_token: c.bos_token,
      eos_token: c.eos_token,
      ...c.extra,
    });
    out.push(JSON.stringify({ text }));
  } catch (e) {
    out.push(JSON.stringify({ error: String(e && e.message ? e.message : e) }));
  }
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
