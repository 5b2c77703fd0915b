import Storage
import Testing

@Suite struct SQLScriptTests {
    @Test func splitsOnSemicolons() {
        #expect(
            SQLScript.statements("CREATE TABLE a (x int);\nCREATE TABLE b (y int);\n") == [
                "CREATE TABLE a (x int)", "CREATE TABLE b (y int)",
            ])
    }

    @Test func ignoresSemicolonsInQuotesCommentsAndDollarBodies() {
        let script = """
            -- a comment; with a semicolon
            INSERT INTO t VALUES ('a;b', 'it''s; fine');
            /* block; /* nested; */ comment */ SELECT "odd;name" FROM t;
            CREATE FUNCTION f() RETURNS int AS $body$ BEGIN RETURN 1; END; $body$ LANGUAGE plpgsql;
            SELECT $$x;y$$, $1;
            """
        let statements = SQLScript.statements(script)
        #expect(statements.count == 4)
        #expect(statements[0].hasSuffix("VALUES ('a;b', 'it''s; fine')"))
        #expect(statements[1].contains("\"odd;name\""))
        #expect(statements[2].contains("RETURN 1; END; $body$ LANGUAGE plpgsql"))
        #expect(statements[3] == "SELECT $$x;y$$, $1")
    }

    @Test func dropsCommentOnlyTails() {
        #expect(SQLScript.statements("SELECT 1;\n-- trailing comment\n") == ["SELECT 1"])
    }
}
