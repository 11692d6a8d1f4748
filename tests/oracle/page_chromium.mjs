// The page at `/` of eaglet serve in headless Chromium (Debian's `chromium`, driven by the npm `puppeteer-core`):
// it loads, a typed prompt streams, tokens of both origins (accepted draft, target) are marked in the DOM, live accept
// len and tok/s are shown, the plain/speculative switch works (plain shows only target tokens, the same text under
// greedy), and a screenshot of the speculative answer is written. Against PLAIN_MODEL (no chat template, no drafter)
// the page offers completion only and shows the answer as the target's. Run by CTest (tests/CMakeLists.txt).
//
//   node page_chromium.mjs EAGLET_BIN TARGET DRAFTER PLAIN_MODEL SCREENSHOT.png
//
// Exit 0 pass, 1 fail, 77 skip: only when no Chromium is installed (scripts/deps.sh installs it; it could not here).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

const SKIP = 77;
const [eaglet, target, drafter, plainModel, screenshot] = process.argv.slice(2);
if (!screenshot) {
  console.error('usage: node page_chromium.mjs EAGLET_BIN TARGET DRAFTER PLAIN_MODEL SCREENSHOT.png');
  process.exit(2);
}

function findChromium() {
  const candidates = [process.env.EAGLET_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'];
  return candidates.find((p) => p && existsSync(p));
}
const chromium = findChromium();
if (!chromium) {
  console.log('SKIP: no Chromium (/usr/bin/chromium): scripts/deps.sh installs the Debian package `chromium` and ' +
              'could not on this machine; install it (apt-get install chromium) or set EAGLET_CHROMIUM to run this test');
  process.exit(SKIP);
}
const { default: puppeteer } = await import('puppeteer-core');

function fail(message) {
  console.error('FAIL: ' + message);
  process.exitCode = 1;
}
function check(condition, message) {
  if (!condition) fail(message);
  return condition;
}

// eaglet serve on a free port: resolves with its base URL once it prints it.
function startServer(modelArgs) {
  const server = spawn(eaglet, ['serve', ...modelArgs, '-t', '1', '-c', '512', '--port', '0'],
                       { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = new Promise((resolve, reject) => {
    server.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on (http:\/\/[^ ]+:[0-9]+)/);
      if (m) resolve(m[1]);
    });
    server.on('exit', (code) => reject(new Error(`eaglet serve exited (${code}) before listening:\n${log}`)));
    setTimeout(() => reject(new Error(`eaglet serve did not listen within 60 s:\n${log}`)), 60000);
  });
  return { server, url, log: () => log };
}

// Types the prompt, sets the switch, sends, and waits for the end; returns what the page shows.
async function run(page, prompt, speculative, maxTokens) {
  await page.$eval('#prompt', (e) => { e.value = ''; });
  await page.type('#prompt', prompt);
  await page.select('#mode', 'completion');
  await page.evaluate(() => { window.statsSeen = []; });
  await page.$eval('#max_tokens', (e, n) => { e.value = String(n); }, maxTokens);
  const box = await page.$('#speculative');
  if ((await box.evaluate((e) => e.checked)) !== speculative) await box.click();
  await page.click('#send');
  await page.waitForFunction(() => document.getElementById('stats').textContent.includes('finish') &&
                                   !document.getElementById('send').disabled, { timeout: 60000 });
  return page.evaluate(() => ({
    spans: [...document.querySelectorAll('#out span')].map((s) => ({ origin: s.className, text: s.textContent })),
    stats: document.getElementById('stats').textContent,
    seen: window.statsSeen,
    error: document.getElementById('error').textContent,
  }));
}

// The numbers of the stats line: "tokens N  draft D  tok/s R  accept len A  first token T ms  finish F".
function parseStats(line) {
  const number = (name) => {
    const m = line.match(new RegExp(name + ' ([0-9.]+)'));
    return m ? Number(m[1]) : null;
  };
  return { tokens: number('tokens'), drafts: number('draft'), rate: number('tok/s'), accept: number('accept len'),
           plain: line.includes('accept len - (plain)'), finish: (line.match(/finish (\w+)/) || [])[1] };
}

// Every stats line the page shows while it streams (the page's global show()).
async function recordStats(page) {
  await page.evaluate(() => {
    const show = window.show;
    window.show = (stats) => { show(stats); window.statsSeen.push(document.getElementById('stats').textContent); };
  });
}

// static: the auto policy's shapes follow this machine's timings, so two requests could differ in accept len; with
// one fixed shape the page's run must show exactly the reference request's.
const { server, url, log } = startServer(['-m', target, '-d', drafter, '--speculative-policy', 'static']);
let browser, plainServer;
try {
  const base = await url;
  const prompt = 'import os\n\n\ndef list_python_files(root):\n';  // make demo's prompt
  const maxTokens = 64;
  const reference = await (await fetch(base + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0 }),
  })).json();
  const want = reference.choices[0].text;

  // --no-sandbox: Chromium's sandbox refuses to run as root (test machines, containers).
  browser = await puppeteer.launch({ executablePath: chromium, headless: true,
                                     args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 800 });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(base + '/', { waitUntil: 'networkidle0' });
  check(await page.title() === 'eaglet', 'the page title is not "eaglet"');
  await recordStats(page);

  const spec = await run(page, prompt, true, maxTokens);
  check(spec.error === '', `speculative run shows an error: ${spec.error}`);
  const drafts = spec.spans.filter((s) => s.origin === 'draft').length;
  const targets = spec.spans.filter((s) => s.origin === 'target').length;
  check(drafts > 0, `no token marked as an accepted draft (class "draft") in #out: ${JSON.stringify(spec.spans)}`);
  check(targets > 0, 'no token marked as the target\'s (class "target") in #out');
  check(spec.spans.every((s) => s.origin === 'draft' || s.origin === 'target'), 'a token span of another class');
  check(spec.spans.map((s) => s.text).join('') === want,
        `the page's tokens do not spell the API's answer:\n page: ${JSON.stringify(spec.spans.map((s) => s.text).join(''))}\n api:  ${JSON.stringify(want)}`);
  const final = parseStats(spec.stats);
  check(final.tokens === reference.usage.completion_tokens,
        `stats count ${final.tokens} tokens, the server generated ${reference.usage.completion_tokens}`);
  check(final.drafts === drafts, `stats count ${final.drafts} drafts, the page marks ${drafts}`);
  check(final.finish === 'length', `finish is ${final.finish}, expected length: ${spec.stats}`);
  check(final.rate > 0, `tok/s is not shown as a positive number: ${spec.stats}`);
  check(Math.abs(final.accept - reference.speculative.accept_length) < 0.005,
        `accept len ${final.accept} differs from the server's ${reference.speculative.accept_length}`);
  const live = spec.seen.map(parseStats).filter((s) => !s.finish && s.tokens > 1);
  check(live.length > 0 && live.every((s) => s.accept >= 1 && s.rate !== null),
        `no live accept len / tok/s while streaming: ${JSON.stringify(spec.seen)}`);
  mkdirSync(dirname(screenshot), { recursive: true });
  await page.screenshot({ path: screenshot, fullPage: true });

  const plain = await run(page, prompt, false, maxTokens);
  check(plain.error === '', `plain run shows an error: ${plain.error}`);
  check(plain.spans.length > 0 && plain.spans.every((s) => s.origin === 'target'),
        `the plain run marks tokens other than the target's: ${JSON.stringify(plain.spans.filter((s) => s.origin !== 'target'))}`);
  check(plain.spans.map((s) => s.text).join('') === want, 'the plain run\'s text differs from the speculative one (greedy)');
  const plainStats = parseStats(plain.stats);
  check(plainStats.drafts === 0 && plainStats.plain, `the plain run's stats show drafts or an accept len: ${plain.stats}`);

  // A model without a chat template, served without a drafter: completion only; speculative asked, plain given.
  plainServer = startServer(['-m', plainModel]);
  await page.goto((await plainServer.url) + '/', { waitUntil: 'networkidle0' });
  await page.waitForFunction(() => document.querySelector('#mode option[value=chat]').disabled, { timeout: 20000 });
  check(await page.$eval('#mode', (e) => e.value) === 'completion', 'the page did not switch to completion');
  check((await page.$eval('#mode', (e) => e.title)).includes('no chat template'),
        'the mode switch does not say why chat is off');
  await recordStats(page);
  const alone = await run(page, 'def add(a, b):', true, 16);
  check(alone.error === '', `the completion shows an error: ${alone.error}`);
  check(alone.spans.length > 0 && alone.spans.every((s) => s.origin === 'target'),
        'a server without a drafter marks tokens other than the target\'s');
  check(parseStats(alone.stats).plain, `a server without a drafter shows an accept len: ${alone.stats}`);
  check(pageErrors.length === 0, `JavaScript errors on the page: ${pageErrors.join('; ')}`);

  console.log(`speculative: ${spec.spans.length} tokens (${drafts} accepted drafts, ${targets} target): ${spec.stats}`);
  console.log(`plain: ${plain.spans.length} tokens, all target: ${plain.stats}`);
  console.log(`no chat template, no drafter: completion only, ${alone.spans.length} target tokens: ${alone.stats}`);
  console.log(`screenshot: ${screenshot}`);
} catch (e) {
  fail(e.stack || String(e));
  console.error(log());
  if (plainServer) console.error(plainServer.log());
} finally {
  if (browser) await browser.close();
  server.kill('SIGTERM');
  if (plainServer) plainServer.server.kill('SIGTERM');
}
