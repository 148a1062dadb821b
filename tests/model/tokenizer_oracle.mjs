// Oracle side of the tokenizer tests: runs @huggingface/tokenizers (pure JS) on the requests in
// a JSON-lines file and writes one JSON line of answers per request.
//
//   node tokenizer_oracle.mjs TOKENIZERS_MJS TOKENIZER_JSON CONFIG_JSON|- IN.jsonl OUT.jsonl
//
// Request {"text": s}  -> {"ids": [...], "ids_special": [...], "decoded": s', "decoded_skip": s''}
// Request {"ids": [..]} -> {"decoded": s, "decoded_skip": s'}
import fs from "node:fs";
import { pathToFileURL } from "node:url";

const [modulePath, tokenizerPath, configPath, inPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node tokenizer_oracle.mjs TOKENIZERS_MJS TOKENIZER_JSON CONFIG_JSON|- IN OUT");
  process.exit(2);
}
const { Tokenizer } = await import(pathToFileURL(modulePath).href);
const tokenizerJson = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
const config = configPath === "-" ? {} : JSON.parse(fs.readFileSync(configPath, "utf8"));
const tokenizer = new Tokenizer(tokenizerJson, config);

// The JS decode() refuses an empty list; an empty list decodes to "" everywhere else.
const decode = (ids, skip) =>
  ids.length === 0 ? "" : tokenizer.decode(ids, { skip_special_tokens: skip });

const out = [];
for (const line of fs.readFileSync(inPath, "utf8").split("\n")) {
  if (line.length === 0) continue;
  const request = JSON.parse(line);
  if (request.text !== undefined) {
    const ids = tokenizer.encode(request.text, { add_special_tokens: false }).ids;
    const idsSpecial = tokenizer.encode(request.text, { add_special_tokens: true }).ids;
    out.push(JSON.stringify({
      ids, ids_special: idsSpecial, decoded: decode(ids, false), decoded_skip: decode(ids, true),
    }));
  } else {
    out.push(JSON.stringify({
      decoded: decode(request.ids, false), decoded_skip: decode(request.ids, true),
    }));
  }
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
