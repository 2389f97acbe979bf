// The TypeScript SDK 2.4's host side of the Skills extension against a
// server: SkillsClient lists its skills, reads every file of the first one
// (each verified: listed, size, digest; SKILL.md's frontmatter compared)
// and reads its folder. Prints what it read, one line each; exits 1 on any
// failure. Run with its working directory where the SDK is installed
// (.cache/peers/skills-ts, by scripts/peers):
//   SKILLS_URL=http://127.0.0.1:PORT/mcp SKILLS_ERA=modern|legacy \
//     node --input-type=module -e "$(cat skills_reader.mjs)"
// modern pins 2026-07-28; legacy is the client's default 2025 handshake.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { SkillsClient } from '@modelcontextprotocol/client/ext/skills';

const url = process.env.SKILLS_URL;
const era = process.env.SKILLS_ERA ?? 'modern';
const options = era === 'legacy' ? {} : { versionNegotiation: { mode: { pin: '2026-07-28' } } };
const client = new Client({ name: 'ts-skills-reader', version: '1.0.0' }, options);
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const skills = new SkillsClient(client);
console.log(`supported ${skills.supported} directoryRead ${skills.directoryRead}`);
const listing = await skills.list();
for (const entry of listing.skills) console.log(`entry ${entry.uri}`);
const first = listing.skills[0];
const md = await skills.read(first);
console.log(`read ${md.uri} verified=${md.verified} name=${md.frontmatter?.name}`);
console.log(md.text);
for (const file of first.resources) {
  const read = await skills.read(first, file.uri);
  console.log(`read ${read.uri} verified=${read.verified} bytes=${read.bytes.length}`);
}
const root = first.uri.slice(0, -'/SKILL.md'.length);
const dir = await skills.readDirectory(root);
console.log(`dir ${root} ${dir.resources.map((r) => `${r.name}:${r.mimeType}`).join(' ')}`);
await client.close();
