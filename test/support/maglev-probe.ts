// A script that keeps V8 compiling new hot functions (Maglev takes each one), as a gateway does while it warms
// under load, and prints `{"grew": <bytes>}`: how far the resident set grew meanwhile. Run by the Deno and
// Node launch-flag tests (test/process/deno-launch.test.ts, node-v8-flags.test.ts).

/** The probe's source; `rss` is an expression for the runtime's resident set in bytes. */
export function maglevProbeSource(rss: string): string {
  return `const body = (i) => {
  let s = 'let s = a | 0;\\n';
  for (let k = 0; k < 60; k++) s += \`if (a > \${k}) { s = (s * \${k + i} + b.x\${k % 7}) | 0; } else { s = (s ^ \${k}) + b.y; }\\n\`;
  return s + 'return s;';
};
const fns = [];
for (let i = 0; i < 300; i++) fns.push(new Function('a', 'b', body(i)));
const arg = { x0: 1, x1: 2, x2: 3, x3: 4, x4: 5, x5: 6, x6: 7, y: 8 };
const before = ${rss};
let max = before;
let sink = 0;
for (let round = 0; round < 3; round++) {
  for (const f of fns) {
    for (let n = 0; n < 600; n++) sink += f(n, arg);
    max = Math.max(max, ${rss});
  }
}
console.log(JSON.stringify({ grew: max - before, sink: sink & 1 }));`;
}
