// Run by test/process/yaml-thread.test.ts under Deno and Bun (which load the worker's TypeScript as it is):
// parses in turn through runtimes/yaml-thread.ts, workers kept when the argument is `keep`; one JSON line of
// what each parse gave and how many workers had started after it.
import { workersStarted, yamlThread } from '../../runtimes/yaml-thread.ts';
import { assembleYaml } from '../../src/resources/yaml-pieces.ts';

const args = (globalThis as { Deno?: { args: string[] } }).Deno?.args ?? process.argv.slice(2);
const parseYamlOffThread = yamlThread({ keepWorker: args[0] === 'keep' });

const rows = (prefix: string, n: number) =>
  `models:\n${Array.from({ length: n }, (_, i) => `  - name: ${prefix}-${i}\n`).join('')}`;
const parse = (text: string) => assembleYaml(parseYamlOffThread(text), () => Promise.resolve());
const summary = (r: Awaited<ReturnType<typeof parse>>) =>
  r.ok
    ? { ok: true, names: (r.value as { models: { name: string }[] }).models.map((m) => m.name).slice(-2) }
    : { ok: false, lines: r.errors.map((e) => e.line ?? null) };

const out: unknown[] = [];
out.push(summary(await parse(rows('a', 1200))), workersStarted);
out.push(summary(await parse('models: [\n  - x: 1\n')), workersStarted);
out.push(summary(await parse(rows('b', 3))), workersStarted);
// Closed before its last piece: its worker still holds rows, so it is ended, not kept.
const pieces = parseYamlOffThread(rows('c', 1200));
out.push((await pieces.next()).type);
pieces.close();
out.push(summary(await parse(rows('d', 2))), workersStarted);
out.push(summary(await parse(rows('e', 1))), workersStarted);
console.log(JSON.stringify(out));
