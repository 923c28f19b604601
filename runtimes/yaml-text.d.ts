// wrangler.toml's `[[rules]] type = "Text"` bundles an imported `.yaml` file as its text (runtimes/workers.ts).
declare module '*.yaml' {
  const text: string;
  export default text;
}
