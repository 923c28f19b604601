// `--name value` flags for the small bench programs (bare-proxy, undici-client); runs on Node, Bun and Deno.
const args = process.argv.slice(2);

export function flag(name: string, dflt?: string): string {
  const i = args.indexOf(`--${name}`);
  const v = i >= 0 ? args[i + 1] : undefined;
  if (v === undefined && dflt === undefined) throw new Error(`--${name} is required`);
  return v ?? dflt!;
}

/** A `--name` switch without a value. */
export function has(name: string): boolean {
  return args.includes(`--${name}`);
}
