// A definition's `result_schema`: the JSON Schema (draft 2020-12) that what the agent runtime reports
// of a call (POST /runtime/runs/{id}/result) must satisfy. Checked when the definition is saved, so
// a run never meets a schema that cannot be compiled, and applied with every problem listed, each
// with a JSON Pointer into the request body. Ajv does both; compiled schemas are kept by their text.
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { LRUCache } from 'lru-cache';
import type { FieldError } from '../errors.js';

function newAjv(): Ajv2020 {
  // strict: a misspelt keyword or an unknown format is refused at save rather than ignored.
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats.default(ajv);
  return ajv;
}

const ajv = newAjv();
/** Compiled schemas by their JSON text: a definition's schema is compiled once per process, not per report. */
const compiled = new LRUCache<string, ValidateFunction>({ max: 256 });

function compile(schema: unknown): ValidateFunction {
  const text = JSON.stringify(schema);
  let validate = compiled.get(text);
  if (!validate) {
    validate = ajv.compile(schema as object);
    compiled.set(text, validate);
  }
  return validate;
}

/** Why a result_schema cannot be used, at `pointer` (the schema's place in the definition); empty when it can. */
export function resultSchemaProblems(schema: unknown, pointer = '/result_schema'): FieldError[] {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return [{ pointer, detail: 'Must be a JSON Schema object.' }];
  if (!ajv.validateSchema(schema)) {
    return (ajv.errors ?? []).map((error) => ({ pointer: `${pointer}${error.instancePath}`, detail: `Not a valid JSON Schema (2020-12): ${error.message ?? 'invalid'}.` }));
  }
  try {
    compile(schema);
  } catch (error) {
    return [{ pointer, detail: `Cannot be compiled: ${error instanceof Error ? error.message : String(error)}.` }];
  }
  return [];
}

function problemOf(error: ErrorObject, pointer: string): FieldError {
  // A missing property is reported at its object; say its own place, where the client looks for it.
  const missing = error.keyword === 'required' ? `/${String((error.params as { missingProperty: string }).missingProperty).replace(/~/g, '~0').replace(/\//g, '~1')}` : '';
  return { pointer: `${pointer}${error.instancePath}${missing}`, detail: error.message ?? 'Is not valid.' };
}

/** Every way `data` fails the schema, with pointers under `pointer` (where the data sits in the request); empty when valid. */
export function resultProblems(schema: unknown, data: unknown, pointer = '/data'): FieldError[] {
  const validate = compile(schema);
  if (validate(data)) return [];
  return (validate.errors ?? []).map((error) => problemOf(error, pointer));
}
