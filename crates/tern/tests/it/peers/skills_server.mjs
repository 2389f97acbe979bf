// A stdio server of the TypeScript SDK 2.4 serving a folder of Agent Skills
// with its Skills extension: loadSkills(SKILLS_DIR, {prefix: 'acme'}),
// attached to the McpServer serveStdio makes for the connection (either
// era). Run with its working directory where the SDK is installed
// (.cache/peers/skills-ts, by scripts/peers):
//   SKILLS_DIR=DIR node --input-type=module -e "$(cat skills_server.mjs)"
import { McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { loadSkills } from '@modelcontextprotocol/server/ext/skills/node';

const catalog = await loadSkills(process.env.SKILLS_DIR, {
  prefix: 'acme',
  strict: true,
  onWarning: (w) => console.error(`warning ${w.path}: ${w.message}`),
});
serveStdio(() => {
  const mcp = new McpServer({ name: 'ts-skills', version: '1.0.0' }, { capabilities: {} });
  catalog.attach(mcp);
  return mcp;
});
