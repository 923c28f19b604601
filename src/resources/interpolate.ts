// The first stage of the resources-file pipeline (docs/configuration.md "resources.yaml"): `${VAR}` in every
// string scalar, from the environment the gateway was started with.
export type Env = Record<string, string | undefined>;

/**
 * Replace `${VAR}` in every string scalar; `$$` is a literal `$`. Unset or empty variables are errors.
 * Copy on write: what holds no `$` is returned as it is (the same object), so a caller that changes the
 * result changes `value`; a file without variables allocates nothing here.
 */
export function interpolate(
  value: unknown,
  env: Env,
  onError: (path: (string | number)[], msg: string) => void,
): unknown {
  const path: (string | number)[] = [];
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return v.includes('$') ? substitute(v, env, (msg) => onError([...path], msg)) : v;
    if (Array.isArray(v)) {
      let out: unknown[] | undefined;
      for (let i = 0; i < v.length; i++) {
        path.push(i);
        const x = walk(v[i]);
        path.pop();
        if (x !== v[i]) (out ??= v.slice())[i] = x;
      }
      return out ?? v;
    }
    if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      let out: Record<string, unknown> | undefined;
      for (const k of Object.keys(o)) {
        path.push(k);
        const x = walk(o[k]);
        path.pop();
        if (x !== o[k]) (out ??= { ...o })[k] = x;
      }
      return out ?? v;
    }
    return v;
  };
  return walk(value);
}

function substitute(s: string, env: Env, onError: (msg: string) => void): string {
  return s.replace(/\$\$|\$\{([^}]*)\}/g, (m, name: string | undefined) => {
    if (m === '$$') return '$';
    if (!name || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      onError(`invalid variable reference "${m}"`);
      return '';
    }
    const v = env[name];
    if (v === undefined || v === '') {
      onError(`environment variable ${name} is ${v === undefined ? 'not set' : 'empty'}`);
      return '';
    }
    return v;
  });
}

/** `a.b[2].c` */
export function dotted(path: readonly (string | number)[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${p}` : p;
  return out;
}
