// A real client for eaglet serve: the official `openai` npm package streams a completion and a chat completion
// (greedy, with usage), lists the models and sends one request the server must refuse. Prints what it got as JSON
// for tests/server/server_test.cpp.
//
//   node openai_client.mjs BASE_URL COMPLETION_PROMPT CHAT_MESSAGE MAX_TOKENS
import OpenAI from 'openai';

const [baseURL, prompt, message, maxTokensText] = process.argv.slice(2);
if (!maxTokensText) {
  console.error('usage: node openai_client.mjs BASE_URL COMPLETION_PROMPT CHAT_MESSAGE MAX_TOKENS');
  process.exit(2);
}
const max_tokens = Number(maxTokensText);
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });

async function collect(stream, textOf) {
  const out = { text: '', finish_reason: null, usage: null, chunks: 0 };
  for await (const chunk of stream) {
    out.chunks += 1;
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      out.text += textOf(choice) ?? '';
      if (choice.finish_reason) out.finish_reason = choice.finish_reason;
    }
  }
  return out;
}

const model = 'eaglet';
const completion = await collect(
  await client.completions.create({
    model, prompt, max_tokens, temperature: 0, stream: true, stream_options: { include_usage: true },
  }),
  (c) => c.text);
const chat = await collect(
  await client.chat.completions.create({
    model, messages: [{ role: 'user', content: message }], max_tokens, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  }),
  (c) => c.delta?.content);
const models = [];
for await (const m of client.models.list()) models.push(m.id);
let bad_request = null;
try {
  await client.completions.create({ model, prompt, max_tokens, n: 2 });
} catch (e) {
  bad_request = { status: e.status, message: e.error?.message ?? e.message };
}
console.log(JSON.stringify({ completion, chat, models, bad_request }));
