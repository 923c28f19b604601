// The first stage of the resources-file pipeline (docs/configuration.md "resources.yaml"): `${VAR}` in every
// string scalar, from the environment the gateway was started with.
export type Env = Record<string, string | undefined>;

/** Replace `${VAR}` in every string scalar; `$$` is a literal `$`. Unset or empty variables are errors. */
export function interpolate(
  value: unknown,
  env: Env,
  onError: (path: (string | number)[], msg: string) => void,
  path: (string | number)[] = [],
): unknown {
  if (typeof value === 'string') {
    if (!value.includes('$')) return value;
    return value.replace(/\$\$|\$\{([^}]*)\}/g, (m, name: string | undefined) => {
      if (m === '$$') return '$';
      if (!name || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        onError(path, `invalid variable reference "${m}"`);
        return '';
      }
      const v = env[name];
      if (v === undefined || v === '') {
        onError(path, `environment variable ${name} is ${v === undefined ? 'not set' : 'empty'}`);
        return '';
      }
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, env, onError, [...path, i]));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, env, onError, [...path, k]);
    return out;
  }
  return value;
}

/** `a.b[2].c` */
export function dotted(path: readonly (string | number)[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${p}` : p;
  return out;
}
