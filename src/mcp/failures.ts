// What can go wrong with an MCP upstream, as values (docs/mcp.md "Errors").

/** An upstream failed; `message` is for the WARN line only, never the caller (it may name the upstream). */
export class UpstreamFailure extends Error {
  override readonly name = 'UpstreamFailure';
  constructor(message: string, readonly unauthorized = false) {
    super(message);
  }
}

/** The upstream's tool content could not be read as MCP content: the caller sees this text. */
export class MalformedContent extends Error {
  override readonly name = 'MalformedContent';
}
