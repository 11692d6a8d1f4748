#include "server/page.h"

namespace eaglet::server {

std::string_view index_page() {
  return R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>eaglet</title>
<style>
  body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
  textarea { width: 100%; height: 6rem; font: inherit; }
  #controls { display: flex; gap: 1rem; flex-wrap: wrap; align-items: center; margin: .5rem 0; }
  #out { white-space: pre-wrap; font-family: ui-monospace, monospace; border: 1px solid #ccc; border-radius: 4px;
         padding: .75rem; min-height: 8rem; }
  .draft { background: #c8f0c8; }
  .target { background: #dde6ff; }
  #stats { font-family: ui-monospace, monospace; margin: .5rem 0; }
  .legend span { padding: 0 .4rem; border-radius: 3px; }
  #error { color: #b00; }
</style>
</head>
<body>
<h1>eaglet</h1>
<textarea id="prompt" placeholder="Message">Write a Python function that lists the files in a folder.</textarea>
<div id="controls">
  <label><select id="mode"><option value="chat">chat</option><option value="completion">completion</option></select></label>
  <label><input type="checkbox" id="speculative" checked> speculative</label>
  <label>max tokens <input type="number" id="max_tokens" value="256" min="1" style="width:5rem"></label>
  <label>temperature <input type="number" id="temperature" value="0" min="0" max="2" step="0.1" style="width:4rem"></label>
  <label>API key <input type="password" id="key" style="width:8rem"></label>
  <button id="send">Send</button> <button id="stop" disabled>Stop</button>
</div>
<div class="legend"><span class="draft">accepted draft token</span> <span class="target">target token</span></div>
<div id="stats">&nbsp;</div>
<div id="out"></div>
<div id="error"></div>
<script>
const $ = (id) => document.getElementById(id);
let controller = null;

function show(stats) {
  const rate = stats.decodeSeconds > 0 ? (stats.tokens - 1) / stats.decodeSeconds : 0;
  // Live: tokens after the first per verify round; at the end the server's own figure (none when it ran plain).
  let accept = stats.rounds > 0 ? ((stats.tokens - 1) / stats.rounds).toFixed(2) : '-';
  if (stats.finish) accept = stats.serverAccept === null ? '- (plain)' : stats.serverAccept.toFixed(2);
  $('stats').textContent = `tokens ${stats.tokens}  draft ${stats.drafts}  tok/s ${rate.toFixed(1)}  ` +
    `accept len ${accept}  first token ${stats.ttft === null ? '-' : (stats.ttft * 1000).toFixed(0) + ' ms'}` +
    (stats.finish ? `  finish ${stats.finish}` : '');
}

function addToken(piece) {
  const span = document.createElement('span');
  span.className = piece.origin;
  span.textContent = piece.text;
  $('out').appendChild(span);
}

async function send() {
  $('out').textContent = '';
  $('error').textContent = '';
  const chat = $('mode').value === 'chat';
  const body = { max_tokens: Number($('max_tokens').value), temperature: Number($('temperature').value),
                 stream: true, stream_options: { include_usage: true }, return_token_origin: true,
                 speculative: $('speculative').checked };
  if (chat) body.messages = [{ role: 'user', content: $('prompt').value }];
  else body.prompt = $('prompt').value;
  const headers = { 'Content-Type': 'application/json' };
  if ($('key').value) headers.Authorization = 'Bearer ' + $('key').value;
  controller = new AbortController();
  $('send').disabled = true;
  $('stop').disabled = false;
  const start = performance.now();
  const stats = { tokens: 0, drafts: 0, rounds: 0, ttft: null, decodeSeconds: 0, finish: null, serverAccept: null };
  let first = 0;
  try {
    const res = await fetch(chat ? '/v1/chat/completions' : '/v1/completions',
                            { method: 'POST', headers, body: JSON.stringify(body), signal: controller.signal });
    if (!res.ok) throw new Error((await res.json()).error.message);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
        const chunk = JSON.parse(event.slice(6));
        if (chunk.error) throw new Error(chunk.error.message);
        for (const piece of chunk.eaglet_tokens || []) {
          const now = performance.now();
          if (stats.tokens === 0) { first = now; stats.ttft = (now - start) / 1000; }
          else if (piece.origin === 'target') stats.rounds += 1;
          if (piece.origin === 'draft') stats.drafts += 1;
          stats.tokens += 1;
          stats.decodeSeconds = (now - first) / 1000;
          addToken(piece);
        }
        if (chunk.speculative) stats.serverAccept = chunk.speculative.accept_length;
        // The last piece may be the detokenizer's remainder, no token of its own: the server's count is exact.
        if (chunk.usage) stats.tokens = chunk.usage.completion_tokens;
        for (const choice of chunk.choices || []) if (choice.finish_reason) stats.finish = choice.finish_reason;
        show(stats);
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') $('error').textContent = e.message;
  } finally {
    $('send').disabled = false;
    $('stop').disabled = true;
    controller = null;
  }
}

// A model without a chat template answers only completions: say so instead of failing at the first Send.
async function checkChat() {
  const res = await fetch('/tokenize', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) });
  if (res.status !== 400) return;
  const error = (await res.json()).error;
  if (error.param !== 'messages') return;
  $('mode').value = 'completion';
  $('mode').querySelector('option[value=chat]').disabled = true;
  $('mode').title = error.message;
}

$('send').onclick = send;
checkChat().catch(() => {});
$('stop').onclick = () => controller && controller.abort();
</script>
</body>
</html>
)html";
}

}  // namespace eaglet::server
