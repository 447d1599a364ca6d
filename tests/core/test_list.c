/* test_list.c - TILE_LIST_PUSH and TILE_LIST_UNLINK: front, middle, back
 * and only node, checked in both directions after every step. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "list.h"

struct node {
    int id;
    struct node *prev, *next;
};

/* The ids front to back as digits, after checking every back link. */
static int ids(struct node *head)
{
    int v = 0;
    struct node *last = NULL;
    for (struct node *n = head; n; last = n, n = n->next) {
        assert_ptr_equal(n->prev, last);
        v = v * 10 + n->id;
    }
    return v;
}

static void test_push_and_unlink_everywhere(void **state)
{
    (void)state;
    struct node n[5] = {{1}, {2}, {3}, {4}, {5}};
    struct node *head = NULL;
    for (int i = 0; i < 5; i++)
        TILE_LIST_PUSH(head, &n[i]);
    assert_int_equal(ids(head), 54321);
    TILE_LIST_UNLINK(head, &n[2]); /* middle */
    assert_int_equal(ids(head), 5421);
    TILE_LIST_UNLINK(head, &n[4]); /* front */
    assert_int_equal(ids(head), 421);
    TILE_LIST_UNLINK(head, &n[0]); /* back */
    assert_int_equal(ids(head), 42);
    TILE_LIST_PUSH(head, &n[2]); /* a node comes back */
    assert_int_equal(ids(head), 342);
    TILE_LIST_UNLINK(head, &n[3]);
    TILE_LIST_UNLINK(head, &n[1]);
    TILE_LIST_UNLINK(head, &n[2]); /* the only node */
    assert_null(head);
}

/* A walk that saves next first may unlink the node it stands on. */
static void test_unlink_while_walking(void **state)
{
    (void)state;
    struct node n[4] = {{1}, {2}, {3}, {4}};
    struct node *head = NULL;
    for (int i = 0; i < 4; i++)
        TILE_LIST_PUSH(head, &n[i]);
    for (struct node *w = head, *next; w; w = next) {
        next = w->next;
        if (w->id % 2 == 0)
            TILE_LIST_UNLINK(head, w);
    }
    assert_int_equal(ids(head), 31);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_and_unlink_everywhere),
        cmocka_unit_test(test_unlink_while_walking),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
