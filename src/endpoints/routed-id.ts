// The ids the files, batches and fine-tuning routes hand out (docs/batch-files-endpoints.md "Routed ids"): an
// upstream id with the model row that routed it, so a later call that names the id finds the same upstream.
// Nothing is stored; any id not of this form is used raw.
import { base64Decode, base64Encode, encodeText } from '../util/bytes.ts';
import { errors, type ProxyError } from '../http/errors.ts';

const PREFIX = 'aisix-';
const SEPARATOR = ';model,';
const SAFE_ID = /^[A-Za-z0-9._:-]{1,256}$/;

export function base64UrlEncode(text: string): string {
  return base64Encode(encodeText(text)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

/** The text of a base64url (no padding) string; undefined when it is not one or not UTF-8. */
export function base64UrlDecode(b64: string): string | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(b64) || b64.length % 4 === 1) return undefined;
  try {
    const bytes = base64Decode(b64.replaceAll('-', '+').replaceAll('_', '/'));
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** AISIX's routed id: `aisix-` + base64url("<raw>;model,<display_name>"). */
export function encodeRoutedId(raw: string, model: string): string {
  return PREFIX + base64UrlEncode(raw + SEPARATOR + model);
}

/** The upstream id and model row name of a routed id; undefined for any other id (it is used raw). */
export function decodeRoutedId(id: string): { raw: string; model: string } | undefined {
  if (!id.startsWith(PREFIX)) return undefined;
  const text = base64UrlDecode(id.slice(PREFIX.length));
  if (text === undefined) return undefined;
  const at = text.lastIndexOf(SEPARATOR);
  if (at <= 0 || at + SEPARATOR.length >= text.length) return undefined;
  return { raw: text.slice(0, at), model: text.slice(at + SEPARATOR.length) };
}

/** An id put into an upstream URL path must not carry separators or a dot segment: AISIX's charset. */
export function unsafeId(raw: string): ProxyError | undefined {
  if (SAFE_ID.test(raw) && raw !== '.' && raw !== '..') return undefined;
  return errors.badRequest(`request payload is invalid: malformed resource id ${JSON.stringify(raw)}`);
}
