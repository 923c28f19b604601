// Reading a Prometheus text exposition in tests: the samples of one family whose labels include the given ones.

/** Label pairs of one sample line (`name{a="1",b="x\"y"} 3`), unescaped. */
export function labelsOf(line: string): Record<string, string> {
  const out: Record<string, string> = {};
  const open = line.indexOf('{');
  if (open < 0) return out;
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/gy;
  re.lastIndex = open + 1;
  for (let m = re.exec(line); m; m = re.exec(line)) {
    out[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    if (line[re.lastIndex] === ',') re.lastIndex++;
  }
  return out;
}

/** Sum of the samples of `name` (exactly that series name) whose labels include every pair of `labels`. */
export function sumSamples(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let sum: number | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const have = labelsOf(line);
    if (!Object.entries(labels).every(([k, v]) => have[k] === v)) continue;
    sum = (sum ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** Label names of the first sample of `name`, in exposition order. */
export function labelNamesOf(text: string, name: string): string[] | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`));
  return line ? Object.keys(labelsOf(line)) : undefined;
}
