// One aggregated error report for a file: every problem found, each with where it is and what is wrong,
// so an operator fixes a file in one pass instead of one error per restart.
import { type Document, isNode, LineCounter, parseDocument } from 'yaml';

export interface ReportEntry {
  /** Where: `models[2] ("gpt-4o")`, `proxy.addr`, `file`. */
  scope: string;
  message: string;
  line?: number;
}

export class FileReport {
  readonly entries: ReportEntry[] = [];
  constructor(readonly label: string, readonly file: string) {}

  add(scope: string, message: string, line?: number): void {
    this.entries.push({ scope, message, line });
  }

  get ok(): boolean {
    return this.entries.length === 0;
  }

  /** `resources file <f>: N error(s):` then `  - <scope>: <msg>` a line each. */
  format(): string {
    const lines = this.entries.map((e) => `  - ${e.scope}: ${e.message}${e.line ? ` (line ${e.line})` : ''}`);
    return `${this.label} ${this.file}: ${this.entries.length} error(s):\n${lines.join('\n')}`;
  }
}

/**
 * The first line of a yaml error, without the source text some messages quote (`Not a YAML token: sk-…`,
 * `… token in YAML stream: "sk-…"`): it can be a secret, and the line number already says where to look.
 */
function yamlMessage(message: string): string {
  const first = message.split('\n')[0] ?? message;
  return first.replace(
    /^(Unexpected [\w-]+ token in YAML stream|Not a YAML token|Block scalar header includes extra characters): .*$/,
    '$1',
  );
}

/** A parsed YAML document that can say on which line a path starts. */
export interface YamlSource {
  value: unknown;
  lineOf(path: readonly (string | number)[]): number | undefined;
}

/** Parse YAML (JSON is YAML); syntax errors go into the report with their line. */
export function parseYaml(text: string, report: FileReport): YamlSource | undefined {
  const lineCounter = new LineCounter();
  const doc: Document = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    for (const e of doc.errors) {
      // linePos is only filled in by prettyErrors (off: its context lines could echo a secret), so ask the counter.
      const line = e.linePos?.[0]?.line ?? lineCounter.linePos(e.pos[0]).line;
      report.add('yaml', yamlMessage(e.message), line);
    }
    return undefined;
  }
  return {
    value: doc.toJS({ maxAliasCount: 100 }),
    lineOf(path) {
      for (let n = path.length; n >= 0; n--) {
        const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
        if (isNode(node) && node.range) return lineCounter.linePos(node.range[0]).line;
      }
      return undefined;
    },
  };
}

/** `a.b[2].c` from a zod-style path. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out ? `.${String(p)}` : String(p);
  }
  return out;
}
