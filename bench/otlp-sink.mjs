// A trace collector for the benchmark: answers every OTLP/HTTP POST with 200 after reading its body, and
// counts the spans it received (printed on SIGTERM/SIGINT). `node bench/otlp-sink.mjs <port>`; then run the
// bench with SLUICE_BENCH_OTLP_ENDPOINT=http://127.0.0.1:<port>/v1/traces (bench/README.md).
import http from 'node:http';

const port = Number(process.argv[2] ?? 4318);
let posts = 0;
let spans = 0;
const server = http.createServer((req, res) => {
  const parts = [];
  req.on('data', (c) => parts.push(c));
  req.on('end', () => {
    posts++;
    spans += (Buffer.concat(parts).toString('utf8').match(/"spanId"/g) ?? []).length;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    if (posts % 50 === 1) console.log(`otlp-sink: ${posts} POSTs, ${spans} spans so far`);
  });
});
server.listen(port, '127.0.0.1', () => console.log(`otlp-sink listening ${port}`));
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    console.log(`otlp-sink received ${posts} POSTs, ${spans} spans`);
    process.exit(0);
  });
}
