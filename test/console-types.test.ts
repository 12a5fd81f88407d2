// The console's types of the API's answers (console/types.js, JSDoc) are written by hand after the
// OpenAPI document: this keeps them true to it, property name by property name.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { build } from './helpers/app.js';
import { describe, it } from './helpers/suite.js';

interface Document {
  components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
}

/** Each `@typedef {object} Name` block whose description names a schema as `[Schema]`, with its properties. */
function typedefsNamingSchemas(source: string): { typedef: string; schema: string; properties: string[] }[] {
  const found = [];
  for (const [, block = ''] of source.matchAll(/\/\*\*([\s\S]*?)\*\//g)) {
    const typedef = /@typedef \{object\} (\w+)/.exec(block)?.[1];
    const schema = /\[([A-Z][A-Za-z]+)\]/.exec(block)?.[1];
    if (!typedef || !schema) continue;
    // The type may hold braces of its own ({{ … }[]}): the name follows the line's last one.
    const properties = [...block.matchAll(/@property \{.*\}\s+\[?(\w+)/g)].map((m) => m[1] ?? '');
    found.push({ typedef, schema, properties });
  }
  return found;
}

describe('The console\'s types of the API\'s answers', () => {
  it('name only properties the OpenAPI document\'s schema of the same answer has', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as Document;
    const typedefs = typedefsNamingSchemas(readFileSync(new URL('../console/types.js', import.meta.url), 'utf8'));
    assert.deepEqual(typedefs.map((d) => d.schema).sort(), ['ApiKey', 'AuditEvent', 'Campaign', 'OrganizationSettings', 'StatsSeries', 'StatsSeriesBucket', 'Suppression', 'TelephonyConfigurationDetails', 'TelephonyConfigurationReadiness', 'WebhookEndpoint', 'Workflow', 'WorkflowDefinitionVersion', 'WorkflowRun', 'WorkflowRunEvent', 'WorkflowVersion', 'WorkflowWithVersions'], 'the typedefs checked');
    for (const { typedef, schema, properties } of typedefs) {
      const documented = doc.components.schemas[schema]?.properties;
      assert.ok(documented, `${typedef}: the document has a schema ${schema}`);
      assert.ok(properties.length > 0, `${typedef} has properties`);
      for (const property of properties) assert.ok(property in documented, `${typedef}.${property} is a property of ${schema}`);
    }
  });
});
